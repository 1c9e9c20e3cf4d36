"""Inline prompts: approvals answered with a single key, or from another terminal, and the
agent's ``ask_user`` questions answered with a typed line. One question at a time.

The answerer registered by ``tether chat`` prints the question above the status area (laid out
by :mod:`tether.surfaces.cli._approval_prompt`: the tool, the sandbox mode and who asks, with
the asking session's lineage, the command that answers it from another terminal, then what
the agent wrote, escaped and in full, and the scopes a grant may cover), then waits for keys
read by the running turn's keyboard handler, one per choice: ``a`` allows once; ``r`` or Enter
rejects (the safe default); where the question offers grants, ``s`` allows for the session and
``w`` always, the scope's number then picks what the grant covers
(:mod:`tether.surfaces.cli._grant_choice`, as in ``tether run``). Keys pressed before a
question is shown answer nothing, so typing ahead can never approve an action the user has not
seen.

Every approval this chat asks is also answerable from another terminal from the moment it is
asked, while it waits its turn on screen too: it waits in the store's answer box
(:class:`~tether.session._answer_wait.BoxWait`) for ``tether approvals answer``. The first
answer wins, whichever surface gives it: a key pressed here settles the same wait, so a later
``tether approvals answer`` is told it came too late; an answer from there closes the question
here, saying who gave it. An answer that counts for nothing (a file written into the box, a
connection from a confined process) is recorded on the asking session's log and shown.

An ``ask_user`` question is answered by typing a line and pressing Enter; Ctrl-C cancels
the turn instead.

Questions of both kinds queue behind one another (two background children may ask at once).
A question whose request is cancelled (the turn was interrupted) disappears from the prompt.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from rich.console import Console
from rich.text import Text

from tether.kernel import Next
from tether.kernel._printable import printable
from tether.plugins._approval_from_store import asked_id, asking_session
from tether.policy._approval import Answer, ApprovalReply, ApprovalRequest
from tether.policy._events import GrantScope
from tether.policy._modes import ApprovalOutcome, SandboxMode
from tether.session._answer_channel import Offer
from tether.session._answer_wait import BoxWait
from tether.surfaces.cli._answer_elsewhere import (
    answerable_elsewhere,
    answerer_name,
    elsewhere_command,
    take_turn,
)
from tether.surfaces.cli._approval_prompt import asker_lines, question_lines, session_name
from tether.surfaces.cli._grant_choice import AnswerKeys, Chosen, grant_lines, granted_scope
from tether.surfaces.cli.chat._render import CHAT_ANSWERER, SessionDirectory
from tether.tools._ask_user import QuestionRequest

SHOWN: Final[dict[str, tuple[str, str]]] = {
    ApprovalOutcome.ALLOWED_ONCE: ("✔ allowed once", "green"),
    ApprovalOutcome.ALLOWED_FOR_SESSION: ("✔ allowed for this session", "green"),
    ApprovalOutcome.ALLOWED_ALWAYS: ("✔ always allowed in this workspace", "green"),
    ApprovalOutcome.REJECTED: ("✘ rejected", "red"),
    ApprovalOutcome.CANCELLED: ("✘ cancelled", "yellow"),
}


def chat_answerer() -> str:
    """``tether chat (<user>)``: recorded as ``approval/decided {answered_by}``."""
    return answerer_name(CHAT_ANSWERER)


def named(directory: SessionDirectory) -> Callable[[str], str]:
    """How chat names a session in a question: the root, or a child by its label."""

    def name(session_id: str) -> str:
        return session_name(session_id, directory.root_id, directory.label(session_id))

    return name


def describe(
    request: ApprovalRequest,
    directory: SessionDirectory,
    current: SandboxMode | None = None,
    elsewhere: str | None = None,
) -> list[str]:
    """The question for ``request``; ``current`` is the asking session's sandbox mode,
    ``elsewhere`` the command that answers it from another terminal."""
    return question_lines(request, asker_lines(request, named(directory)), current, elsewhere)


@dataclass(eq=False)
class OpenQuestion:
    request: ApprovalRequest
    answer: asyncio.Future[Offer]
    """Settled by the first answer: a key here, or ``tether approvals answer`` elsewhere."""
    keys: AnswerKeys
    """The keys typed at it so far, read into its answer."""
    keyed: bool = False
    """The answer came from this keyboard."""
    chosen: Chosen | None = None
    """The choice keyed here (with a grant's scope)."""


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
        store: str | None = None,
        answered_here: set[str] | None = None,
    ) -> None:
        """``store`` is the URL of the run's store, whose answer box lets another terminal
        answer (``None``: only this keyboard can)."""
        self.console = console
        self.directory = directory
        self._accepting = accepting
        self._changed = changed
        self._catch_up = catch_up
        self.name = name or chat_answerer()
        self._mode_of = mode_of
        """The asking session's sandbox mode, for the question's mode line."""
        self.store = store
        self.answered_here = answered_here if answered_here is not None else set()
        """Ids of the approvals whose answer this prompt showed (the transcript does not
        show them again)."""
        self.current: OpenQuestion | None = None
        self.current_text: OpenTextQuestion | None = None
        self.waiting = 0
        """Questions queued behind the current one."""
        self._lock = asyncio.Lock()

    async def answer(self, request: ApprovalRequest, next_: Next[ApprovalReply]) -> ApprovalReply:
        """The ``approval/request`` listener."""
        if not self._accepting():
            return await next_()  # nobody is at the keyboard (any more)
        answer: asyncio.Future[Offer] = asyncio.get_running_loop().create_future()
        async with answerable_elsewhere(self.store, request, answer, self._report) as box_wait:
            if not await self._queue(answer):
                if answer.done():
                    return self._answered_while_queued(request, answer.result())
                return await next_()
            try:
                return await self._ask(request, answer, box_wait)
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

    def _report(self, text: str) -> None:
        self.console.print(Text(printable(text), style="red"))

    async def _queue(self, answered: asyncio.Future[Offer] | None = None) -> bool:
        """Take the keyboard (questions come one at a time); ``False``, holding nothing, when
        nobody is there to answer (outside a turn, or the turn ended while this one waited),
        or when ``answered`` was settled from another terminal meanwhile."""
        if not self._accepting():
            return False
        self.waiting += 1
        self._changed()
        try:
            if not await take_turn(self._lock, answered):
                return False
        finally:
            self.waiting -= 1
        try:
            if self._catch_up is not None:
                # Let the transcript show the call being asked about before the question.
                await self._catch_up()
        except BaseException:
            self._lock.release()
            raise
        if not self._accepting() or (answered is not None and answered.done()):
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

    async def _ask(
        self, request: ApprovalRequest, answer: asyncio.Future[Offer], box_wait: BoxWait | None
    ) -> Answer:
        approval_id = asked_id(request)
        elsewhere = (
            elsewhere_command(approval_id, self.store, request)
            if box_wait is not None and approval_id is not None and self.store is not None
            else None
        )
        lines = describe(request, self.directory, self._mode_of(request), elsewhere)
        question = OpenQuestion(request, answer, AnswerKeys(request))
        self.console.print(Text("\n".join([*lines, *grant_lines(request)]), style="bold"))
        self.console.print(Text(f"  {question.keys.prompt()} > ", style="bold"))
        self.current = question
        self._changed()
        try:
            offer = await (box_wait.answer() if box_wait is not None else answer)
        except asyncio.CancelledError:
            self._show("cancelled")
            raise
        finally:
            self.current = None
            self._changed()
        chosen = question.chosen if question.keyed else None
        scope = chosen.scope if chosen is not None else granted_scope(request, offer.outcome)
        self._show(offer.outcome, None if question.keyed else offer.answered_by, scope)
        if approval_id is not None:
            self.answered_here.add(approval_id)
        if chosen is not None:
            return chosen.answer(offer.answered_by)
        return Answer(offer.outcome, offer.answered_by)

    def _answered_while_queued(self, request: ApprovalRequest, offer: Offer) -> Answer:
        """Another terminal answered a question still waiting its turn here."""
        asker = named(self.directory)(asking_session(request).id)
        shown = Text(
            f'approval for "{printable(request.tool_name)}" asked by {asker} was answered '
            "before it was shown here:\n",
            style="bold",
        )
        scope = granted_scope(request, offer.outcome)
        shown.append_text(self._ending(offer.outcome, offer.answered_by, scope))
        self.console.print(shown)
        approval_id = asked_id(request)
        if approval_id is not None:
            self.answered_here.add(approval_id)
        return Answer(offer.outcome, offer.answered_by)

    def _show(self, outcome: str, by: str | None = None, scope: GrantScope | None = None) -> None:
        self.console.print(self._ending(outcome, by, scope))

    @staticmethod
    def _ending(outcome: str, by: str | None, scope: GrantScope | None = None) -> Text:
        """``  ✔ allowed once``; a grant's scope after it (``✔ allowed for this session:
        Write(./**)``); and ``· answered by WHO`` when another terminal answered."""
        text, style = SHOWN.get(outcome, (outcome, ""))
        granted = f": {printable(scope.describe())}" if scope is not None else ""
        answered = f" · answered by {printable(by)}" if by is not None else ""
        return Text(f"  {text}{granted}{answered}", style=style)

    def key(self, key: str) -> bool:
        """A key pressed while an approval question is open (a letter, a digit, ``\\r`` for
        Enter, ``\\x1b`` for Escape); ``False`` when it answered nothing. A grant's key with
        several scopes on offer asks for the scope in the status area
        (:meth:`AnswerKeys.prompt <tether.surfaces.cli._grant_choice.AnswerKeys.prompt>`)."""
        question = self.current
        if question is None or question.answer.done():
            return False
        picking = question.keys.picking
        chosen = question.keys.press(key)
        if chosen is None:
            if question.keys.picking is not picking:
                self._changed()
            return False
        return self.press(chosen.choice.outcome, chosen)

    def press(self, outcome: str, chosen: Chosen | None = None) -> bool:
        """Answer the open approval question from this keyboard (``chosen``: the choice keyed,
        with a grant's scope); ``False`` when none is open (or another terminal's answer came
        first)."""
        question = self.current
        if question is None or question.answer.done():
            return False
        question.keyed = True
        question.chosen = chosen
        question.answer.set_result(Offer(outcome, self.name))
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
        self.press(ApprovalOutcome.CANCELLED)
        self.submit(None)


__all__ = [
    "SHOWN",
    "ApprovalPrompt",
    "OpenQuestion",
    "OpenTextQuestion",
    "chat_answerer",
    "describe",
    "named",
]
