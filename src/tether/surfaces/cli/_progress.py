"""Feedback while ``tether run`` works: streamed text, a spinner with elapsed time, a summary.

At a terminal, the root's text streams to stdout as the model produces it, and stderr shows a
spinner naming what is running (the model, or a tool and which agent called it) with the
elapsed time, which keeps ticking whatever the run waits for (the model, a command, an answer
from another terminal). Without a terminal nothing is animated: stdout gets the final output
only, so ``tether run`` stays pipe-friendly. The one-line summary, and a line per tool call as
it starts (:mod:`._tool_lines`), always go to stderr.

What streams to a terminal is the model's text, escaped as a block
(:func:`tether.kernel._printable.printable_block`): line breaks and tabs stay, an escape
sequence, a carriage return or a bidi override shows as ``\x1b``, ``\r``, ``\u202e``. The
spinner's line names tools and asking tools escaped the same way, on one line. While a question
is on this terminal (:meth:`RunProgress.question_on_screen`, held by the terminal answerer)
the spinner is stopped and everything else this module would print waits, so nothing erases,
splits or runs into the question and the key typed after it.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.status import Status
from rich.text import Text

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
        self._spinning = False
        self._activity = "thinking"
        self._paused = False
        """The root's reply is streaming on stdout (the spinner yields the terminal)."""
        self._questions = 0
        """Questions on this terminal now: while there is one, the spinner is stopped and
        nothing else is printed."""
        self._held: list[Callable[[], None]] = []
        """Output that waits for the question on screen to close."""
        self._tools: dict[str, str] = {}
        """The tool each session runs now (for the spinner after an approval)."""
        self._disposers: list[Callable[[], None]] = []

    def __enter__(self) -> RunProgress:
        self._disposers.append(
            self.harness.store.on_event(lambda s, e: self._on_event(SessionEvent(s.id, e)))
        )
        if self.interactive:
            self._disposers.append(self.harness.ctx.on(TEXT_DELTA, self._on_text))
            self._status = self._err.status(_SpinnerLine(self))
            self._show_spinner()
        return self

    def __exit__(self, *_: object) -> None:
        if self._status is not None:
            self._status.stop()
            self._spinning = False
        for dispose in self._disposers:
            dispose()
        if self._paused:
            sys.stdout.write("\n")
            sys.stdout.flush()

    @contextlib.contextmanager
    def question_on_screen(self) -> Iterator[None]:
        """Hold the terminal for a question: no spinner, and nothing else printed until it
        closes (then what waited is printed, in order)."""
        self._questions += 1
        self._show_spinner()
        try:
            yield
        finally:
            self._questions -= 1
            if not self._questions:
                held, self._held = self._held, []
                for write in held:
                    write()
            self._show_spinner()

    def line(self) -> str:
        """The spinner's text: what runs, and for how long the run has been going."""
        return f"{self._activity} · {self.elapsed():.1f}s"

    def _show_spinner(self) -> None:
        """Start or stop the spinner as the terminal's state wants it."""
        if self._status is None:
            return
        wanted = not self._paused and not self._questions
        if wanted and not self._spinning:
            self._status.start()
        elif not wanted and self._spinning:
            self._status.stop()
        self._spinning = wanted

    def _print(self, write: Callable[[], None]) -> None:
        if self._questions:
            self._held.append(write)
        else:
            write()

    def _on_text(self, payload: StreamedText) -> None:
        agent, text = payload
        if agent is self.harness.root and text:
            self._print(lambda: self._stream(text))

    def _stream(self, text: str) -> None:
        if not self._paused:
            # The spinner yields the terminal while the root's reply streams, and comes back
            # when the next tool or step starts.
            self._paused = True
            self._show_spinner()
        sys.stdout.write(printable_block(text))
        sys.stdout.flush()
        self.streamed = True

    def _on_event(self, item: SessionEvent) -> None:
        self.events.append(item)
        event = item.event
        root = self.harness.root
        is_root = root is not None and item.session_id == root.id
        if event.type == ToolCalled.TYPE:
            called = ToolCalled.parse(event.data)
            self._tools[item.session_id] = printable(called.name)
            self._print(lambda: self._tool_line(called, None if is_root else item.session_id))
        elif event.type in (StepOpened.TYPE, TurnClosed.TYPE):
            self._print(self._end_streamed_line)
        who = "root" if is_root else item.session_id[:8]
        if event.type == ToolCalled.TYPE:
            self._activity = f"{who}: running {self._tools[item.session_id]}"
        elif event.type in (ToolResulted.TYPE, RequestHeader.TYPE, StepOpened.TYPE):
            self._tools.pop(item.session_id, None)
            self._activity = f"{who}: thinking"
        elif event.type == ApprovalAsked.TYPE:
            tool = printable(ApprovalAsked.from_data(event.data).tool_name)
            self._activity = f"{who}: waiting for approval of {tool}"
        elif event.type == ApprovalDecided.TYPE:
            running = self._tools.get(item.session_id)
            self._activity = f"{who}: running {running}" if running else f"{who}: thinking"

    def _tool_line(self, called: ToolCalled, agent: str | None) -> None:
        self._end_streamed_line()  # the streamed reply's line ends before the tool's
        self._err.print(tool_line(called, agent), markup=False, highlight=False, soft_wrap=True)

    def _end_streamed_line(self) -> None:
        if self._paused:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self._paused = False
            self._show_spinner()

    def elapsed(self) -> float:
        return time.monotonic() - self.started


class _SpinnerLine:
    """The spinner's text, rendered afresh on each frame so its clock keeps ticking."""

    def __init__(self, progress: RunProgress) -> None:
        self.progress = progress

    def __rich__(self) -> Text:
        return Text(self.progress.line())
