"""``tether approvals``: see and answer pending approvals from any terminal.

``list`` reads the store (never writes); ``answer ID allow|allow-session|allow-always|reject``
hands the answer to the run waiting for it with ``--approval-from store``, through the approval
socket its wait marker in the store's answer box names (:mod:`tether.session._answer_box`).
"""

from __future__ import annotations

import time
from typing import Annotated, NoReturn

import typer

from tether.errors import TetherError
from tether.kernel._printable import printable
from tether.plugins._headline import action_text
from tether.policy._approval import AskedAction
from tether.session._answer_box import AnswerBox
from tether.session._answer_channel import answer_words
from tether.session._pending_approvals import PendingRow, pending_approvals, why_unanswerable
from tether.surfaces.cli._answer_command import WORDS, answer_waiting
from tether.surfaces.cli._common import (
    JsonOption,
    StoreNotFoundError,
    StoreOption,
    fail,
    opened_store,
    print_json,
    run,
    store_url,
    table,
    write_text,
)
from tether.surfaces.cli._unique_match import unique_match

app = typer.Typer(name="approvals", help="List and answer pending approvals.", no_args_is_help=True)


@app.command("list")
def list_pending(store: StoreOption = None, as_json: JsonOption = False) -> None:
    """Every pending approval in the store: id, asking session and lineage, tool, age,
    headline, and last the action: an escalation's mode, the command or path in full."""
    rows = run(_list(store))
    if as_json:
        print_json([row.to_dict() for row in rows])
        return
    if not rows:
        write_text("no pending approvals\n")
        return
    now = time.time() * 1000
    write_text(
        table(
            ["ID", "SESSION", "DEPTH", "TOOL", "AGE", "ANSWERABLE", "HEADLINE", "ACTION"],
            [_cells(row, now) for row in rows],
        )
    )


def _cells(row: PendingRow, now: float) -> list[str]:
    action = AskedAction.from_data(row.action, row.tool_name)
    return [
        row.id,
        " ← ".join(s[:8] for s in row.lineage),
        str(row.delegation_depth),
        printable(row.tool_name),
        f"{max(0, now - row.asked_at) / 1000:.0f}s",
        "yes" if row.waiting else "no (nobody waits on the store)",
        printable(row.headline),
        action_text(action) or "-",
    ]


async def _list(store: str | None) -> list[PendingRow]:
    try:
        async with opened_store(store, existing=True) as persistence:
            return await pending_approvals(persistence, AnswerBox.for_store(store_url(store)))
    except StoreNotFoundError:
        return []


@app.command("answer")
def answer(
    approval_id: Annotated[str, typer.Argument(metavar="APPROVAL_ID")],
    decision: Annotated[str, typer.Argument(metavar=answer_words())],
    store: StoreOption = None,
) -> None:
    """Answer one waiting approval: its id, or a unique prefix of it (first answer wins).
    allow-session and allow-always grant the narrowest scope the question offers."""
    if decision not in WORDS:
        words = list(WORDS)
        raise typer.BadParameter(
            f"answer with {', '.join(words[:-1])} or {words[-1]}", param_hint="DECISION"
        )
    try:
        # The answer box's wait markers are the index of what can be answered now: the id is
        # found there, and the store is read only to say why nothing waits under it.
        if not answer_waiting(approval_id, WORDS[decision], store):
            run(_unanswerable(store, AnswerBox.for_store(store_url(store)), approval_id))
    except TetherError as err:
        fail(err)


async def _unanswerable(store: str | None, box: AnswerBox, wanted: str) -> NoReturn:
    """Raise why nothing waits for ``wanted`` (an id or a prefix): already answered (the box
    says so), else stale or not pending (the store says; it must exist)."""
    answered = unique_match("approval", wanted, box.answered_ids())
    if answered is not None:
        raise why_unanswerable(answered, box, [])
    async with opened_store(store, existing=True) as persistence:
        pending = [row.id for row in await pending_approvals(persistence)]
    raise why_unanswerable(unique_match("approval", wanted, pending) or wanted, box, pending)
