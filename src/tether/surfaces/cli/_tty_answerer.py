"""The terminal answerer: ``tether run`` asks the person at the keyboard.

Used when stdin is a terminal and no ``--approver`` is given. It takes the screen from the
spinner (:meth:`~tether.surfaces.cli._progress.RunProgress.question_on_screen`), shows the
question of :mod:`tether.surfaces.cli._approval_prompt` (tether's facts first, with the asking
child's label and lineage and the command that answers it from another terminal, then what the
agent wrote, escaped and in full), then the choices, and takes one key: ``a`` allows once;
``r`` or Enter rejects (the safe default); Ctrl-D or the end of input is ``unavailable``.
Keys typed before the question was shown are discarded, so typing ahead can never approve an
action the user has not seen; other keys answer nothing.

Like chat's, every question is answerable from another terminal too, from the moment it is
asked (:mod:`tether.surfaces.cli._answer_elsewhere`): the first answer wins, and the question
closes saying who gave it. Questions are asked one at a time. The agent's ``ask_user``
questions are answered with a typed line.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import termios
import tty
from collections.abc import Callable, Iterator
from typing import Final, Protocol, TextIO

from tether._harness import Harness
from tether._signals import cancel_and_wait
from tether.kernel import Context, Disposable, Next
from tether.kernel._printable import printable
from tether.plugins._approval_from_store import asked_id
from tether.policy._approval import Answer, ApprovalReply, ApprovalRequest, register_answerer
from tether.policy._modes import ApprovalOutcome, SandboxMode
from tether.session._answer_channel import Offer
from tether.subagents._descriptor import fold_descriptor
from tether.surfaces.cli._answer_elsewhere import (
    answerable_elsewhere,
    answerer_name,
    elsewhere_command,
    take_turn,
)
from tether.surfaces.cli._approval_prompt import (
    CHOICES,
    CHOICES_TEXT,
    SessionName,
    asker_lines,
    choice_for,
    question_lines,
    session_mode,
    session_name,
)
from tether.tools._ask_user import USER_QUESTION, QuestionRequest

RUN_ANSWERER: Final = "tether run"
END_OF_INPUT: Final = "\x04"
"""Ctrl-D: with the terminal taking single keys, it arrives as a character."""
INTERRUPT: Final = "\x03"
"""Ctrl-C, which the terminal hands over as a character while a question takes keys."""
NO_CHARACTER: Final = b"\0"
"""``_POSIX_VDISABLE``: a terminal control character set to it is off."""
READ_SIZE: Final = 1024


class QuestionScreen(Protocol):
    def question_on_screen(self) -> contextlib.AbstractContextManager[None]:
        """Hold the terminal (no spinner, nothing else printed) while a question is shown."""
        ...


class _NoScreen:
    @contextlib.contextmanager
    def question_on_screen(self) -> Iterator[None]:
        yield


class TerminalInput:
    """Keys and lines from the terminal on ``fd``, read on the event loop (so a question
    answered elsewhere stops reading at once), the terminal taking single keys only while a
    key is awaited."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    @contextlib.contextmanager
    def single_keys(self) -> Iterator[None]:
        """The terminal takes single keys, unechoed, while this lasts; what was typed before
        it began is discarded (enter it before the question is shown). Ctrl-C arrives as a
        key (:meth:`choice` says so), so the question's line can end before the interrupt
        is reported."""
        saved = termios.tcgetattr(self.fd)
        tty.setcbreak(self.fd, termios.TCSAFLUSH)
        keys = termios.tcgetattr(self.fd)
        keys[6][termios.VINTR] = NO_CHARACTER
        termios.tcsetattr(self.fd, termios.TCSANOW, keys)
        try:
            yield
        finally:
            termios.tcsetattr(self.fd, termios.TCSANOW, saved)

    async def choice(self) -> ApprovalOutcome | None:
        """The answer of the first key that gives one (``unavailable`` at the end of input),
        or ``None`` for Ctrl-C, within :meth:`single_keys`."""
        while True:
            typed = await self._read()
            for key in typed or END_OF_INPUT:
                if key == INTERRUPT:
                    return None
                if key == END_OF_INPUT:
                    return ApprovalOutcome.UNAVAILABLE
                choice = choice_for(key)
                if choice is not None:
                    return choice.outcome

    async def line(self) -> str | None:
        """One typed line (the terminal's own line editing), or ``None`` at the end of input."""
        typed = ""
        while not typed.endswith("\n"):
            chunk = await self._read()
            if not chunk:
                return typed or None
            typed += chunk
        return typed

    async def _read(self) -> str:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_reader(self.fd, wake)
        try:
            await ready
        finally:
            loop.remove_reader(self.fd)
        try:
            return os.read(self.fd, READ_SIZE).decode(errors="replace")
        except OSError:
            return ""


def live_session_names(harness: Harness) -> SessionName:
    """How ``tether run`` names a session in a question: the root, or a child by the label
    its log records (a session no longer live shows its short id)."""

    def name(session_id: str) -> str:
        root = harness.root
        live = harness.store.get(session_id)
        described = (
            fold_descriptor(live.events, live.header.seed_length or 0) if live is not None else None
        )
        label = described.label if described is not None else None
        return session_name(
            session_id, root.id if root is not None else None, printable(label) if label else None
        )

    return name


def describe(
    request: ApprovalRequest,
    current: SandboxMode | None,
    name: SessionName,
    elsewhere: str | None = None,
) -> list[str]:
    """The question for ``request``; ``current`` is the asking session's sandbox mode."""
    return question_lines(request, asker_lines(request, name), current, elsewhere)


def register_tty_answerer(
    ctx: Context,
    *,
    name: SessionName,
    store: str | None,
    screen: QuestionScreen | None = None,
    terminal: TerminalInput | None = None,
    out: TextIO | None = None,
) -> Disposable:
    """``name`` names sessions in the question; ``store`` is the run's store URL, whose
    answer box lets another terminal answer (``None``: only this keyboard can)."""
    lock = asyncio.Lock()
    keys = terminal or TerminalInput(sys.stdin.fileno())
    shown = screen or _NoScreen()
    me = answerer_name(RUN_ANSWERER)

    def say(text: str, end: str = "\n") -> None:
        # The terminal's stderr as it is now: while the spinner runs, ``sys.stderr`` is its
        # proxy, which would read the question as markup.
        print(text, end=end, file=out or sys.stderr, flush=True)

    def report(text: str) -> None:
        say(f"tether: {printable(text)}")

    async def answer(request: ApprovalRequest, _next: Next[ApprovalReply]) -> Answer:
        answered: asyncio.Future[Offer] = asyncio.get_running_loop().create_future()
        async with answerable_elsewhere(store, request, answered, report) as box_wait:
            if not await take_turn(lock, answered):
                offer = answered.result()
                say(f'approval for "{printable(request.tool_name)}" was answered elsewhere:')
                say(f"  → {offer.outcome} · answered by {printable(offer.answered_by)}")
                return Answer(offer.outcome, offer.answered_by)
            try:
                with shown.question_on_screen(), keys.single_keys():
                    approval_id = asked_id(request)
                    elsewhere = (
                        elsewhere_command(approval_id, store)
                        if box_wait is not None and approval_id is not None and store
                        else None
                    )
                    for line in describe(request, session_mode(ctx, request), name, elsewhere):
                        say(line)
                    say(f"  {CHOICES_TEXT} > ", end="")
                    choices = _QuestionLine(say)
                    typing = asyncio.ensure_future(_key_answer(keys, answered, me, choices))
                    try:
                        offer = await (box_wait.answer() if box_wait is not None else answered)
                    except asyncio.CancelledError:
                        choices.end()  # before whatever the interruption says
                        raise
                    finally:
                        await cancel_and_wait(typing)
                    say(_closing(offer, me))
            finally:
                lock.release()
        return Answer(offer.outcome, offer.answered_by)

    async def question(request: QuestionRequest, _next: Next[str | None]) -> str | None:
        async with lock:
            with shown.question_on_screen():
                say(f"Question from the agent: {printable(request.question)}")
                say("  answer > ", end="")
                reply = await keys.line()
                return None if reply is None else reply.strip()

    ctx.on(USER_QUESTION, question)
    return register_answerer(ctx, answer)


def _closing(offer: Offer, me: str) -> str:
    """The key pressed (none for an answer from elsewhere, or the end of input), then the
    outcome and, from another terminal, who gave it."""
    if offer.answered_by != me:
        return f"\n  → {offer.outcome} · answered by {printable(offer.answered_by)}"
    key = next((c.key for c in CHOICES if c.outcome == offer.outcome), "")
    return f"{key}\n  → {offer.outcome}"


class _QuestionLine:
    """The choices' line, which ends once, however the question ends."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self._say = say
        self.ended = False

    def end(self) -> None:
        if not self.ended:
            self.ended = True
            self._say("")


async def _key_answer(
    keys: TerminalInput, answered: asyncio.Future[Offer], me: str, line: _QuestionLine
) -> None:
    """Settle ``answered`` with the key pressed here, unless another terminal came first.
    Ctrl-C ends the question's line, then interrupts as it does anywhere else."""
    outcome = await keys.choice()
    if outcome is None:
        line.end()
        signal.raise_signal(signal.SIGINT)
        return
    if not answered.done():
        answered.set_result(Offer(outcome, me))


__all__ = [
    "RUN_ANSWERER",
    "QuestionScreen",
    "TerminalInput",
    "describe",
    "live_session_names",
    "register_tty_answerer",
]
