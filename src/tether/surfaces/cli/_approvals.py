"""``tether approvals``: see and answer pending approvals from any terminal.

``list`` reads the store (never writes); ``answer ID allow|allow-session|allow-always|reject``
hands the answer to the run waiting for it with ``--approval-from store``, through the approval
socket its wait marker in the store's answer box names (:mod:`tether.session._answer_box`).
"""

from __future__ import annotations

import time
from typing import Annotated

import typer

from tether.kernel._printable import printable
from tether.plugins._headline import action_text
from tether.policy._approval import AskedAction
from tether.session._answer_box import AnswerBox, PendingRow, answer_pending, pending_approvals
from tether.session._answer_channel import CLI_SURFACE
from tether.surfaces.cli._common import (
    JsonOption,
    StoreNotFoundError,
    StoreOption,
    opened_store,
    print_json,
    run,
    store_url,
    table,
    write_text,
)
from tether.surfaces.cli._id_prefix import unique_match

app = typer.Typer(name="approvals", help="List and answer pending approvals.", no_args_is_help=True)

WORDS = {
    "allow": "allowed-once",
    "allow-session": "allowed-for-session",
    "allow-always": "allowed-always",
    "reject": "rejected",
}
"""The answers, as typed: a grant (``allow-session``, ``allow-always``) takes the narrowest
scope the question offers."""


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
    decision: Annotated[str, typer.Argument(metavar="allow|allow-session|allow-always|reject")],
    store: StoreOption = None,
) -> None:
    """Answer one pending approval (first answer wins). allow-session and allow-always grant
    the narrowest scope the question offers."""
    if decision not in WORDS:
        raise typer.BadParameter(
            "answer with allow, allow-session, allow-always or reject", param_hint="DECISION"
        )
    row, by = run(_answer(store, approval_id, WORDS[decision]))
    write_text(
        f"{printable(row.id)}: {WORDS[decision]} ({printable(row.tool_name)} in session "
        f"{row.session_id}; "
        f"recorded as answered by {by})\n"
    )


async def _answer(store: str | None, approval_id: str, outcome: str) -> tuple[PendingRow, str]:
    async with opened_store(store, existing=True) as persistence:
        box = AnswerBox.for_store(store_url(store))
        # A unique prefix of a pending id names it; anything else is answered as typed, so an
        # unknown or already-decided id keeps its own specific error.
        pending = [row.id for row in await pending_approvals(persistence, box)]
        approval_id = unique_match("approval", approval_id, pending) or approval_id
        return await answer_pending(persistence, box, approval_id, outcome, CLI_SURFACE)
