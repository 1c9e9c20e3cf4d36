"""The terminal answerer: ``tether run`` asks the person at the keyboard.

Used when stdin is a terminal and no ``--approver`` is given. It takes the screen from the
spinner (:meth:`~tether.surfaces.cli._progress.RunProgress.question_on_screen`), shows the
question of :mod:`tether.surfaces.cli._approval_prompt` (tether's facts first, with the asking
child's label and lineage and the command that answers it from another terminal, then what the
agent wrote, escaped and in full, and the scopes a grant may cover), then the choices, and
takes one key per choice: ``a`` allows once; ``r`` or Enter rejects (the safe default); where
the question offers grants, ``s`` allows for the session and ``w`` always, the scope's number
then picks what the grant covers (:mod:`tether.surfaces.cli._grant_choice`); Ctrl-D or the end
of input is ``unavailable``. Keys typed before the question was shown are discarded, so typing
ahead can never approve an action the user has not seen; other keys answer nothing, and a key
that sends an escape sequence (an arrow, a function key) is one key (:func:`split_keys`).

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
from collections import deque
from collections.abc import Callable, Iterator
from typing import Final, Protocol, TextIO

from tether._harness import Harness
from tether._readable import readable
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
    SessionName,
    asker_lines,
    question_lines,
    session_mode,
    session_name,
)
from tether.surfaces.cli._grant_choice import AnswerKeys, Chosen, grant_lines, granted_scope, said
from tether.tools._ask_user import USER_QUESTION, QuestionRequest

RUN_ANSWERER: Final = "tether run"
END_OF_INPUT: Final = "\x04"
"""Ctrl-D: with the terminal taking single keys, it arrives as a character."""
INTERRUPT: Final = "\x03"
"""Ctrl-C, which the terminal hands over as a character while a question takes keys."""
NO_CHARACTER: Final = b"\0"
"""``_POSIX_VDISABLE``: a terminal control character set to it is off."""
READ_SIZE: Final = 1024
ESC: Final = "\x1b"
CSI_FINAL: Final = range(0x40, 0x7F)
"""The last character of a control sequence (``ESC [`` parameters, then one of these)."""


def split_keys(typed: str) -> list[str]:
    """The keys in what one read brought: a character each, except that an escape sequence
    (an arrow or a function key: ``ESC [ … final``, ``ESC O x``; Alt with a key: ``ESC x``) is
    one key, so none of its letters is taken for a choice's (the up arrow sends ``ESC [ A``). A
    terminal writes a key's sequence at once, so one read holds all of it; an Escape alone is
    the Escape key."""
    keys: list[str] = []
    at = 0
    while at < len(typed):
        end = at + 1
        after = typed[end] if end < len(typed) else None
        if typed[at] == ESC and after is not None and after != ESC:
            end += 1
            if after == "[":  # parameters up to the final character, included
                while end < len(typed) and ord(typed[end]) not in CSI_FINAL:
                    end += 1
                end = min(end + 1, len(typed))
            elif after == "O":
                end = min(end + 1, len(typed))
        keys.append(typed[at:end])
        at = end
    return keys


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
        self._typed: deque[str] = deque()
        """Keys read but not taken yet (one read may bring several)."""

    @contextlib.contextmanager
    def single_keys(self) -> Iterator[None]:
        """The terminal takes single keys, unechoed, while this lasts; what was typed before
        it began is discarded (enter it before the question is shown). Ctrl-C arrives as a
        key (:data:`INTERRUPT`), so the question's line can end before the interrupt is
        reported."""
        self._typed.clear()
        saved = termios.tcgetattr(self.fd)
        tty.setcbreak(self.fd, termios.TCSAFLUSH)
        keys = termios.tcgetattr(self.fd)
        keys[6][termios.VINTR] = NO_CHARACTER
        termios.tcsetattr(self.fd, termios.TCSANOW, keys)
        try:
            yield
        finally:
            termios.tcsetattr(self.fd, termios.TCSANOW, saved)

    async def key(self) -> str:
        """The next key typed, within :meth:`single_keys` (:data:`END_OF_INPUT` at the end of
        input)."""
        while not self._typed:
            self._typed.extend(split_keys(await self._read() or END_OF_INPUT))
        return self._typed.popleft()

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
        await readable(self.fd)
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
        return session_name(session_id, root.id if root is not None else None, label)

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
                say(f"  → {_elsewhere(offer, request)}")
                return Answer(offer.outcome, offer.answered_by)
            try:
                with shown.question_on_screen(), keys.single_keys():
                    approval_id = asked_id(request)
                    elsewhere = (
                        elsewhere_command(approval_id, store, request)
                        if box_wait is not None and approval_id is not None and store
                        else None
                    )
                    current = session_mode(ctx, request)
                    for text in [
                        *describe(request, current, name, elsewhere),
                        *grant_lines(request),
                    ]:
                        say(text)
                    reading = AnswerKeys(request)
                    say(f"  {reading.prompt()} > ", end="")
                    last = _QuestionLine(say)
                    typing = asyncio.ensure_future(_key_answer(keys, reading, answered, me, last))
                    try:
                        offer = await (box_wait.answer() if box_wait is not None else answered)
                    except asyncio.CancelledError:
                        last.end()  # before whatever the interruption says
                        raise
                    finally:
                        await cancel_and_wait(typing)
                    say(last.closing(offer, request))
            finally:
                lock.release()
        chosen = last.chosen if offer is last.offer else None
        if chosen is not None:
            return chosen.answer(offer.answered_by)
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


def _elsewhere(offer: Offer, request: ApprovalRequest) -> str:
    """``allowed-once · answered by WHO``, with the scope of a grant."""
    outcome = said(offer.outcome, granted_scope(request, offer.outcome))
    return f"{outcome} · answered by {printable(offer.answered_by)}"


class _QuestionLine:
    """The question's last line (the choices, or a grant's scopes), which ends once, however
    the question ends; and the answer given at this keyboard, if any."""

    def __init__(self, say: Callable[[str, str], None]) -> None:
        self.say = say
        self.ended = False
        self.offer: Offer | None = None
        self.chosen: Chosen | None = None
        """The choice behind :attr:`offer` (none for the end of input)."""

    def end(self) -> None:
        if not self.ended:
            self.ended = True
            self.say("", "\n")

    def closing(self, offer: Offer, request: ApprovalRequest) -> str:
        """The key that answered (none for an answer from elsewhere, or the end of input),
        then the outcome with a grant's scope and, from another terminal, who gave it."""
        if offer is not self.offer:
            return f"\n  → {_elsewhere(offer, request)}"
        chosen = self.chosen
        if chosen is None:
            return f"\n  → {offer.outcome}"
        return f"{chosen.key}\n  → {chosen.said()}"


async def _key_answer(
    keys: TerminalInput,
    reading: AnswerKeys,
    answered: asyncio.Future[Offer],
    me: str,
    line: _QuestionLine,
) -> None:
    """Settle ``answered`` with the answer keyed here, unless another terminal came first.
    A grant's key asks for its scope on a line of its own (Escape shows the choices again).
    Ctrl-C ends the question's line, then interrupts as it does anywhere else."""
    while True:
        key = await keys.key()
        if key == INTERRUPT:
            line.end()
            signal.raise_signal(signal.SIGINT)
            return
        picking = reading.picking
        chosen = None if key == END_OF_INPUT else reading.press(key)
        if key == END_OF_INPUT or chosen is not None:
            if not answered.done():
                line.offer = Offer(
                    chosen.choice.outcome if chosen else ApprovalOutcome.UNAVAILABLE, me
                )
                line.chosen = chosen
                answered.set_result(line.offer)
            return
        if reading.picking is not picking:
            shown = reading.picking.key if reading.picking is not None else ""
            line.say(f"{shown}\n  {reading.prompt()} > ", "")


__all__ = [
    "RUN_ANSWERER",
    "QuestionScreen",
    "TerminalInput",
    "describe",
    "live_session_names",
    "register_tty_answerer",
    "split_keys",
]
