"""Inline prompts: approvals answered with a single key, and the agent's ``ask_user``
questions answered with a typed line. One question at a time.

The answerer registered by ``tether chat`` prints the question above the status area (laid out
by :mod:`tether.surfaces.cli._approval_prompt`: the tool, the sandbox mode and who asks, with
the asking session's lineage, then what the agent wrote, escaped and in full), then
waits for a key read by the running turn's keyboard handler: ``a`` allows once; ``s`` allows
for the session and ``w`` always, with the narrowest scope, where the question offers grants
(:mod:`tether.surfaces.cli._grant_choice`); ``r`` or Enter rejects (the safe default). Keys pressed before a question is shown answer nothing, so
typing ahead can never approve an action the user has not seen.

An ``ask_user`` question is answered by typing a line and pressing Enter; Ctrl-C cancels
the turn instead.

Questions of both kinds queue behind one another (two background children may ask at once).
A question whose request is cancelled (the turn was interrupted) disappears from the prompt.
"""

from __future__ import annotations

import asyncio
import getpass
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, Literal

from rich.console import Console
from rich.text import Text

from tether.kernel import Next
from tether.kernel._printable import printable
from tether.policy._approval import Answer, ApprovalReply, ApprovalRequest
from tether.policy._events import GrantScope
from tether.policy._modes import SandboxMode
from tether.surfaces.cli._approval_prompt import question_lines
from tether.surfaces.cli._grant_choice import grant_answer, grant_labels, grant_lines, offered
from tether.surfaces.cli.chat._render import CHAT_ANSWERER, SessionDirectory
from tether.tools._ask_user import QuestionRequest

KeyAnswer = Literal[
    "allowed-once", "allowed-for-session", "allowed-always", "rejected", "cancelled"
]
"""What a key (or an interrupt) answers: ``a``, ``s`` and ``w`` (a grant with the narrowest
scope, where the question offers one), ``r``/Enter, or Ctrl-C."""
GRANT_KEYS: Final[dict[str, str]] = {"allowed-for-session": "s", "allowed-always": "w"}

ALLOW_KEYS: Final = ("a", "A")
REJECT_KEYS: Final = ("r", "R", "enter")
CHOICES: Final = "[a] Allow once   [r] Reject (default)"
SHOWN: Final[dict[str, tuple[str, str]]] = {
    "allowed-once": ("✔ allowed once", "green"),
    "allowed-for-session": ("✔ allowed for this session", "green"),
    "allowed-always": ("✔ always allowed in this workspace", "green"),
    "rejected": ("✘ rejected", "red"),
    "cancelled": ("✘ cancelled", "yellow"),
}


def answerer_name() -> str:
    """``tether chat (<user>)``: recorded as ``approval/decided {answered_by}``."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name (a container without passwd entries)
        return CHAT_ANSWERER
    return f"{CHAT_ANSWERER} ({user})"


def asker_lines(request: ApprovalRequest, directory: SessionDirectory) -> list[str]:
    """Who asks: the routed child with its lineage, else the asking session itself."""
    origin = request.origin
    if origin is not None:
        child = origin.child_session_id
        lineage = " → ".join(_named(sid, directory) for sid in origin.lineage)
        depth = origin.child.session.header.delegation_depth
        return [
            f"  asked by: subagent {_named(child, directory)} (depth {depth}), routed to the root",
            f"  lineage: {lineage}",
        ]
    session = request.agent.session
    header = session.header
    if header.delegation_depth == 0:
        return [f"  asked by: this session {session.id[:8]} (depth 0)"]
    parent = header.parent_session
    return [
        f"  asked by: subagent {_named(session.id, directory)} "
        f"(depth {header.delegation_depth}"
        + (f", parent {_named(parent, directory)})" if parent else ")")
    ]


def _named(session_id: str, directory: SessionDirectory) -> str:
    if session_id == directory.root_id:
        return f"root {session_id[:8]}"
    label = directory.label(session_id)
    short = session_id[:8]
    return short if label == short else f"[{label}] {short}"


def describe(
    request: ApprovalRequest, directory: SessionDirectory, current: SandboxMode | None = None
) -> list[str]:
    """The question for ``request``; ``current`` is the asking session's sandbox mode."""
    return question_lines(request, asker_lines(request, directory), current)


@dataclass(eq=False)
class OpenQuestion:
    request: ApprovalRequest
    answer: asyncio.Future[KeyAnswer]


@dataclass(eq=False)
class OpenTextQuestion:
    request: QuestionRequest
    answer: asyncio.Future[str | None]
    """The typed line, or ``None`` when the question was cancelled."""


class ApprovalPrompt:
    """The chat's approval answerer (and ``ask_user`` answerer) and the state its keyboard
    handler reads."""

    def __init__(
        self,
        console: Console,
        directory: SessionDirectory,
        *,
        accepting: Callable[[], bool],
        changed: Callable[[], None] = lambda: None,
        catch_up: Callable[[], Awaitable[None]] | None = None,
        name: str | None = None,
        mode_of: Callable[[ApprovalRequest], SandboxMode | None] = lambda _request: None,
    ) -> None:
        self.console = console
        self.directory = directory
        self._accepting = accepting
        self._changed = changed
        self._catch_up = catch_up
        self.name = name or answerer_name()
        self._mode_of = mode_of
        """The asking session's sandbox mode, for the question's mode line."""
        self.current: OpenQuestion | None = None
        self.current_text: OpenTextQuestion | None = None
        self.waiting = 0
        """Questions queued behind the current one."""
        self._lock = asyncio.Lock()

    async def answer(self, request: ApprovalRequest, next_: Next[ApprovalReply]) -> ApprovalReply:
        """The ``approval/request`` listener."""
        if not await self._queue():
            return await next_()  # nobody is at the keyboard (any more)
        try:
            return await self._ask(request)
        finally:
            self._lock.release()
            self._changed()

    async def question(self, request: QuestionRequest, next_: Next[str | None]) -> str | None:
        """The ``user/question`` listener (the agent's ``ask_user`` tool)."""
        if not await self._queue():
            return await next_()
        try:
            return await self._ask_text(request)
        finally:
            self._lock.release()
            self._changed()

    async def _queue(self) -> bool:
        """Take the keyboard (questions come one at a time); ``False``, holding nothing, when
        nobody is there to answer: outside a turn, or the turn ended while this one waited."""
        if not self._accepting():
            return False
        self.waiting += 1
        self._changed()
        try:
            await self._lock.acquire()
        finally:
            self.waiting -= 1
        try:
            if self._catch_up is not None:
                # Let the transcript show the call being asked about before the question.
                await self._catch_up()
        except BaseException:
            self._lock.release()
            raise
        if not self._accepting():
            self._lock.release()
            return False
        return True

    async def _ask_text(self, request: QuestionRequest) -> str | None:
        self.console.print(
            Text(
                f"Question from the agent: {printable(' '.join(request.question.split()))}",
                style="bold",
            )
        )
        self.console.print(Text("  type your answer and press Enter > ", style="bold"))
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self.current_text = OpenTextQuestion(request, future)
        self._changed()
        try:
            reply = await future
        except asyncio.CancelledError:
            self._show("cancelled")
            raise
        finally:
            self.current_text = None
            self._changed()
        if reply is None:
            self._show("cancelled")
            return None
        self.console.print(Text(f"  ↳ {printable(reply)}"))
        return reply

    async def _ask(self, request: ApprovalRequest) -> Answer:
        lines = [*describe(request, self.directory, self._mode_of(request)), *grant_lines(request)]
        self.console.print(Text("\n".join(lines), style="bold"))
        choices = "   ".join(["[a] Allow once", *grant_labels(request), "[r] Reject (default)"])
        self.console.print(Text(f"  {choices} > ", style="bold"))
        future: asyncio.Future[KeyAnswer] = asyncio.get_running_loop().create_future()
        self.current = OpenQuestion(request, future)
        self._changed()
        try:
            outcome = await future
        except asyncio.CancelledError:
            self._show("cancelled")
            raise
        finally:
            self.current = None
            self._changed()
        granted = grant_answer(GRANT_KEYS.get(outcome, ""), request, self.name)
        if granted is not None and isinstance(granted.scope, GrantScope):
            self.console.print(
                Text(f"  {SHOWN[outcome][0]}: {printable(granted.scope.describe())}", style="green")
            )
            return granted
        self._show(outcome)
        return Answer(outcome, self.name)

    def _show(self, outcome: str) -> None:
        text, style = SHOWN.get(outcome, (outcome, ""))
        self.console.print(Text(f"  {text}", style=style))

    def press(self, outcome: KeyAnswer) -> bool:
        """Answer the open approval question; ``False`` when none is open (or it offers no
        such grant)."""
        question = self.current
        if question is None or question.answer.done():
            return False
        if outcome in GRANT_KEYS and outcome not in offered(question.request):
            return False
        question.answer.set_result(outcome)
        return True

    def submit(self, text: str | None) -> bool:
        """Answer the open ``ask_user`` question (``None`` cancels it)."""
        question = self.current_text
        if question is None or question.answer.done():
            return False
        question.answer.set_result(text)
        return True

    def cancel_open(self) -> None:
        """Ctrl-C or quitting: whatever is open is cancelled."""
        self.press("cancelled")
        self.submit(None)


__all__ = [
    "ALLOW_KEYS",
    "CHOICES",
    "REJECT_KEYS",
    "ApprovalPrompt",
    "KeyAnswer",
    "OpenQuestion",
    "OpenTextQuestion",
    "answerer_name",
    "asker_lines",
    "describe",
]
