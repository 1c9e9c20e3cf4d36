"""What the two terminal prompts (``tether chat``, ``tether run`` at a terminal) share so that
another terminal can answer their questions too.

Each question waits in the store's answer box (:class:`~tether.session._answer_wait.BoxWait`)
from the moment it is asked, while it also waits its turn on screen: the prompt and ``tether
approvals answer`` settle the same future, and the first answer wins. A refused answer (a
file in the box, a confined process) is recorded on the asking session's log, between the
audit pair, and reported on the prompt's terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
from collections.abc import AsyncIterator, Callable

from tether._signals import cancel_and_wait
from tether.errors import TetherError
from tether.plugins._approval_from_store import (
    answer_command,
    asked_id,
    asking_session,
    record_refusal,
)
from tether.policy._approval import ApprovalRequest
from tether.session._answer_box import AnswerBox
from tether.session._answer_channel import Asked, Offer, RefusedAnswer
from tether.session._answer_wait import BoxWait


def answerer_name(surface: str) -> str:
    """``SURFACE (<user>)``: recorded as ``approval/decided {answered_by}`` for an answer
    given at that terminal."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name (a container without passwd entries)
        return surface
    return f"{surface} ({user})"


def elsewhere_command(approval_id: str, store: str, request: ApprovalRequest) -> str:
    """What answers ``approval_id`` from another terminal (its first 8 characters name it),
    with the answers ``request`` offers."""
    return answer_command(approval_id[:8], store, request.outcomes())


@contextlib.asynccontextmanager
async def answerable_elsewhere(
    store: str | None,
    request: ApprovalRequest,
    answer: asyncio.Future[Offer],
    report: Callable[[str], None],
) -> AsyncIterator[BoxWait | None]:
    """The approval's wait in the answer box of ``store`` (the run's store URL), settling
    ``answer`` when another terminal answers first; ``None`` when no other terminal can (no
    store tether can name, or a box that cannot hold the wait: ``report`` says so)."""
    approval_id = asked_id(request)
    if store is None or approval_id is None:
        yield None
        return
    session = asking_session(request)

    def refused(refusal: RefusedAnswer) -> None:
        record_refusal(session, approval_id, refusal)
        report(f"refused an answer to approval {approval_id}: {refusal.detail}")

    box_wait = BoxWait(
        AnswerBox.for_store(store),
        approval_id,
        on_refused=refused,
        asked=Asked(session.id, request.tool_name),
        decided=answer,
        offered=request.outcomes(),
    )
    async with contextlib.AsyncExitStack() as stack:
        try:
            await stack.enter_async_context(box_wait)
        except TetherError as err:
            report(f"approval {approval_id} can be answered only here: {err.code}: {err}")
            yield None
            return
        yield box_wait


async def take_turn(lock: asyncio.Lock, answered: asyncio.Future[Offer] | None = None) -> bool:
    """Take the terminal (its questions come one at a time): ``True`` holding ``lock``;
    ``False``, holding nothing, when another terminal settled ``answered`` first."""
    taking = asyncio.ensure_future(lock.acquire())
    either: set[asyncio.Future[Offer] | asyncio.Task[bool]] = {taking}
    if answered is not None:
        either.add(answered)
    try:
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        await _give_back(lock, taking)
        raise
    if answered is not None and answered.done():
        await _give_back(lock, taking)
        return False
    return True


async def _give_back(lock: asyncio.Lock, taking: asyncio.Task[bool]) -> None:
    """Stop waiting for the terminal, and give it back if it was taken meanwhile."""
    await cancel_and_wait(taking)
    if not taking.cancelled():
        lock.release()


__all__ = ["answerable_elsewhere", "answerer_name", "elsewhere_command", "take_turn"]
