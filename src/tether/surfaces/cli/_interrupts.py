"""SIGINT and SIGTERM during ``tether run``: the turn ends durably, then the process exits.

The first signal stops the run the way Ctrl-C stops a turn in ``tether chat``: the root's turn
is cancelled (``turn/end {reason: aborted, cause: user}``; its running commands are killed),
then the run's task is cancelled so the harness disposes of every background child and
flushes every session before the store closes. The command then prints the session id and
how to resume, and exits ``128 + signal`` (130 for SIGINT, 143 for SIGTERM).

A second SIGINT within :data:`DOUBLE_INTERRUPT_SECONDS` quits at once without waiting for the
turn to close: the log is left with an open turn, which the next start (or ``tether sessions
fsck --repair``) closes as for any crash.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from types import TracebackType
from typing import Final, NamedTuple

from tether.agent import Agent
from tether.surfaces.cli._common import error_line

DOUBLE_INTERRUPT_SECONDS: Final = 2.0
"""How soon a second Ctrl-C must follow the first to quit without closing the turn."""

STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)


def exit_status(signum: signal.Signals) -> int:
    """The shell's convention for a process ended by ``signum``."""
    return 128 + int(signum)


class RunInterrupts:
    """While entered, SIGINT and SIGTERM stop the run: ``root()`` names the agent whose turn is
    cancelled (``None`` before the run has one), and the task that entered is cancelled.

    After the cancellation has unwound, :attr:`received` says which signal stopped the run;
    the caller catches the :class:`asyncio.CancelledError` only when it is set.
    """

    def __init__(
        self,
        root: Callable[[], Agent | None],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._root = root
        self._clock = clock
        self.received: signal.Signals | None = None
        self._last: float | None = None
        self._task: asyncio.Task[object] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __enter__(self) -> RunInterrupts:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        for signum in STOP_SIGNALS:
            self._loop.add_signal_handler(signum, self._on_signal, signum)
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        assert self._loop is not None
        for signum in STOP_SIGNALS:
            self._loop.remove_signal_handler(signum)

    def _on_signal(self, signum: signal.Signals) -> None:
        now = self._clock()
        if self.received is not None:
            if signum == signal.SIGINT and (
                self._last is not None and now - self._last <= DOUBLE_INTERRUPT_SECONDS
            ):
                error_line("quitting at once; the next start closes the open turn")
                os._exit(exit_status(self.received))
            self._last = now
            error_line("still stopping the turn · press Ctrl-C again within 2s to quit at once")
            return
        self.received = signum
        self._last = now
        error_line(
            f"{signum.name}: stopping the turn · press Ctrl-C again within 2s to quit at once"
        )
        root = self._root()
        if root is not None:
            root.cancel("user")
        assert self._task is not None
        self._task.cancel()

    def stopped(self) -> bool:
        """Whether a signal stopped the run; if so the task's cancellation is withdrawn, so
        the command can go on to report it."""
        if self.received is None:
            return False
        assert self._task is not None
        self._task.uncancel()
        return True


def resume_hint(session_id: str | None) -> str:
    """The line that tells an interrupted ``tether run`` user how to go on."""
    if session_id is None:
        return "interrupted before a session was stored"
    return (
        f"interrupted; session {session_id} is stored: continue it with "
        f"`tether run --resume {session_id} PROMPT`"
    )


class Interrupted(NamedTuple):
    """How a run that a signal stopped ends: the signal and the root session, if one began."""

    signum: signal.Signals
    session_id: str | None
