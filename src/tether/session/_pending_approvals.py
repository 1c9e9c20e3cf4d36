"""Pending approvals as the store records them: an ``approval/asked`` with no
``approval/decided`` in a session's raw log (what a crash-repairing load reports as
``unmatched_approvals``).

This reads every session, so only what needs the log's word uses it: ``tether approvals
list`` and chat's ``/approvals``, which show what was asked, and the answering command when
nothing waits under the id it was given, to say why (stale, already answered, unknown).
Answering itself goes through the answer box's index (:mod:`tether.session._answer_box`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from tether.errors import TetherError
from tether.session._answer_box import (
    AnswerBox,
    ApprovalNotPendingError,
    ApprovalStaleError,
    stale_text,
)
from tether.session._events import Event
from tether.session._header import SessionHeader
from tether.session._json import JsonValue, thaw
from tether.session.persistence._base import Persistence


@dataclass(frozen=True, slots=True)
class PendingRow:
    id: str
    session_id: str
    lineage: tuple[str, ...]
    """Session ids from the asking session up to its top-level ancestor."""
    delegation_depth: int
    tool_name: str
    headline: str
    asked_at: int
    routed_to: str | None
    action: JsonValue = None
    """The ask's ``action`` as logged (``{tool, command?, path?, target_mode?}``), exact."""
    waiting: bool = False
    """A live process waits for this answer in the store's answer box."""

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "session": self.session_id,
            "lineage": list(self.lineage),
            "delegation_depth": self.delegation_depth,
            "tool_name": self.tool_name,
            "headline": self.headline,
            "asked_at": self.asked_at,
            "routed_to": self.routed_to,
            "action": thaw(self.action),
            "waiting": self.waiting,
        }


def _lineage(header: SessionHeader, headers: dict[str, SessionHeader]) -> tuple[str, ...]:
    chain = [header.id]
    parent = header.parent_session
    while parent is not None and parent not in chain:
        chain.append(parent)
        above = headers.get(parent)
        parent = above.parent_session if above is not None else None
    return tuple(chain)


def _rows(
    header: SessionHeader,
    headers: dict[str, SessionHeader],
    events: Sequence[Event],
    unmatched: Sequence[str],
) -> list[PendingRow]:
    wanted = set(unmatched)
    rows = []
    # This layer sits below policy, so it reads ``approval/asked`` by key; the definition is
    # ``ApprovalAsked`` in policy/_events.py.
    for event in events:
        if event.type == "approval/asked" and event.data.get("id") in wanted:
            routed = event.data.get("routed_to")
            rows.append(
                PendingRow(
                    str(event.data.get("id")),
                    header.id,
                    _lineage(header, headers),
                    header.delegation_depth,
                    str(event.data.get("tool_name")),
                    str(event.data.get("reason") or f'tool "{event.data.get("tool_name")}"'),
                    event.time,
                    str(routed) if routed is not None else None,
                    event.data.get("action"),
                )
            )
    return rows


async def pending_approvals(
    persistence: Persistence, box: AnswerBox | None = None
) -> list[PendingRow]:
    """Every undecided ask in the store, oldest first (never writes anything); with ``box``,
    each row says whether a live process waits for its answer there."""
    headers = {h.id: h for h in await persistence.list()}
    rows: list[PendingRow] = []
    for header in headers.values():
        try:
            stored = await persistence.inspect(header.id)
        except TetherError:
            continue  # unreadable sessions are fsck's business
        if stored.repair.unmatched_approvals:
            rows += _rows(header, headers, stored.events, stored.repair.unmatched_approvals)
    if box is not None:
        rows = [replace(row, waiting=box.is_waited(row.id)) for row in rows]
    return sorted(rows, key=lambda r: r.asked_at)


def why_unanswerable(approval_id: str, box: AnswerBox, pending: Sequence[str]) -> TetherError:
    """Why ``approval_id`` (nothing waits for it in ``box``) cannot be answered: already
    answered, pending with nobody waiting (``pending`` are the store's undecided ids), or not
    pending at all."""
    late = box.too_late(approval_id)
    if late is not None:
        return late
    if approval_id in pending:
        return ApprovalStaleError(stale_text(approval_id))
    return ApprovalNotPendingError(
        f"approval {approval_id} is not pending (already decided, or no such approval)"
    )


__all__ = ["PendingRow", "pending_approvals", "why_unanswerable"]
