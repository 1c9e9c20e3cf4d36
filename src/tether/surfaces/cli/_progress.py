"""Feedback while ``tether run`` works: streamed text, a spinner with elapsed time, a summary.

At a terminal, the root's text streams to stdout as the model produces it, and stderr shows a
spinner naming what is running (the model, or a tool and which agent called it) with the
elapsed time. Without a terminal nothing is animated: stdout gets the final output only, so
``tether run`` stays pipe-friendly. The one-line summary, and a line per tool call as it
starts (:mod:`._tool_lines`), always go to stderr.

What streams to a terminal is the model's text, escaped as a block
(:func:`tether.kernel._printable.printable_block`): line breaks and tabs stay, an escape
sequence, a carriage return or a bidi override shows as ``\x1b``, ``\r``, ``\u202e``. The
spinner's line names tools and asking tools escaped the same way, on one line. While an approval
is asked (from ``approval/asked`` to its ``approval/decided``) the spinner is stopped, so its
redraws never erase or split the question a terminal answerer prints.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from rich.console import Console
from rich.markup import escape
from rich.status import Status

from tether._harness import Harness, SessionEvent
from tether.agent import TEXT_DELTA, StreamedText
from tether.agent._events import RequestHeader, StepOpened, ToolCalled, ToolResulted, TurnClosed
from tether.kernel._printable import printable, printable_block
from tether.policy._events import ApprovalAsked, ApprovalDecided
from tether.surfaces.cli._tool_lines import tool_line


class RunProgress:
    def __init__(self, harness: Harness, *, interactive: bool) -> None:
        self.harness = harness
        self.interactive = interactive
        self.events: list[SessionEvent] = []
        self.started = time.monotonic()
        self.streamed = False
        self._err = Console(stderr=True, highlight=False)
        self._status: Status | None = None
        self._activity = "thinking"
        self._paused = False
        self._asking: set[str] = set()
        """Ids of the approvals being asked: the spinner stays stopped while any is open."""
        self._disposers: list[Callable[[], None]] = []

    def __enter__(self) -> RunProgress:
        self._disposers.append(
            self.harness.store.on_event(lambda s, e: self._on_event(SessionEvent(s.id, e)))
        )
        if self.interactive:
            self._disposers.append(self.harness.ctx.on(TEXT_DELTA, self._on_text))
            self._status = self._err.status(self._line())
            self._status.start()
        return self

    def __exit__(self, *_: object) -> None:
        if self._status is not None:
            self._status.stop()
        for dispose in self._disposers:
            dispose()
        if self._paused:
            sys.stdout.write("\n")
            sys.stdout.flush()

    def _line(self) -> str:
        return f"{escape(self._activity)} · {time.monotonic() - self.started:.1f}s"

    def _on_text(self, payload: StreamedText) -> None:
        agent, text = payload
        if agent is self.harness.root and text:
            if self._status is not None and not self._paused:
                # The spinner yields the terminal while the root's reply streams, and comes
                # back when the next tool or step starts.
                self._status.stop()
                self._paused = True
            sys.stdout.write(printable_block(text))
            sys.stdout.flush()
            self.streamed = True

    def _on_event(self, item: SessionEvent) -> None:
        self.events.append(item)
        event = item.event
        if event.type == ToolCalled.TYPE:
            root = self.harness.root
            agent = None if root is not None and item.session_id == root.id else item.session_id
            if self._paused:
                sys.stdout.write("\n")  # the streamed reply's line ends before the tool's
                sys.stdout.flush()
            self._err.print(
                tool_line(ToolCalled.parse(event.data), agent),
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        if self._status is None:
            return
        asked = ApprovalAsked.from_data(event.data) if event.type == ApprovalAsked.TYPE else None
        if asked is not None:
            self._asking.add(asked.id)
            self._status.stop()
        elif event.type == ApprovalDecided.TYPE:
            self._asking.discard(ApprovalDecided.from_data(event.data).id)
            if not self._asking and not self._paused:
                self._status.start()
        if self._paused and event.type in (ToolCalled.TYPE, StepOpened.TYPE, TurnClosed.TYPE):
            sys.stdout.write("\n")
            sys.stdout.flush()
            self._paused = False
            if not self._asking:
                self._status.start()
        root = self.harness.root
        who = "root" if root is not None and item.session_id == root.id else item.session_id[:8]
        if event.type == ToolCalled.TYPE:
            self._activity = f"{who}: running {printable(ToolCalled.parse(event.data).name)}"
        elif event.type in (ToolResulted.TYPE, RequestHeader.TYPE, StepOpened.TYPE):
            self._activity = f"{who}: thinking"
        elif asked is not None:
            tool = printable(asked.tool_name)
            self._activity = f"{who}: waiting for approval of {tool}"
        self._status.update(self._line())

    def elapsed(self) -> float:
        return time.monotonic() - self.started
