"""Answering approvals from another process (``tether approvals``).

Pending approvals are read from the store itself: an ``approval/asked`` with no
``approval/decided`` in a session's raw log (what a crash-repairing load reports as
``unmatched_approvals``). Answers go into an *answer box* beside the store (one file per
approval id, created exclusively, so the first answer wins and a second one is refused); the
waiting process polls it with a bounded latency and records who answered in
``approval/decided {answered_by}``.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from tether.errors import TetherError
from tether.session import Event, Persistence, SessionHeader, wall_clock_ms
from tether.session.persistence import store_location
from tether.signals import AbortSignal

POLL_SECONDS: Final = 0.05
ANSWERS: Final = ("allowed-once", "rejected")


class ApprovalNotPendingError(TetherError):
    code = "APPROVAL_NOT_PENDING"


class ApprovalAlreadyAnsweredError(TetherError):
    code = "APPROVAL_ALREADY_ANSWERED"


class ApprovalStaleError(TetherError):
    """Pending in the log, but no live process waits for an answer from the store."""

    code = "APPROVAL_STALE"


@dataclass(frozen=True, slots=True)
class BoxedAnswer:
    outcome: str
    by: str
    at: int


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
            "waiting": self.waiting,
        }


class AnswerBox:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @classmethod
    def for_store(cls, url: str) -> AnswerBox:
        scheme, path = store_location(url)
        return cls(
            path / ".answers" if scheme == "jsonl" else path.with_name(path.name + ".answers")
        )

    def _path(self, approval_id: str) -> Path:
        if not approval_id or "/" in approval_id or approval_id.startswith("."):
            raise ApprovalNotPendingError(f"{approval_id!r} is not an approval id")
        return self.directory / f"{approval_id}.json"

    def put(self, approval_id: str, outcome: str, by: str) -> BoxedAnswer:
        if outcome not in ANSWERS:
            raise TetherError(f"an answer is one of {', '.join(ANSWERS)}", code="INVALID_ANSWER")
        answer = BoxedAnswer(outcome, by, wall_clock_ms())
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self._path(approval_id), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError as err:
            raise ApprovalAlreadyAnsweredError(
                f"approval {approval_id} was already answered"
            ) from err
        with os.fdopen(fd, "w") as handle:
            json.dump({"outcome": outcome, "by": by, "at": answer.at}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        return answer

    def get(self, approval_id: str) -> BoxedAnswer | None:
        try:
            raw = json.loads(self._path(approval_id).read_text())
        except (FileNotFoundError, ValueError):
            return None  # absent, or still being written
        if not isinstance(raw, dict) or raw.get("outcome") not in ANSWERS:
            return None
        return BoxedAnswer(
            str(raw["outcome"]), str(raw.get("by", "unknown")), int(raw.get("at", 0))
        )

    async def wait(self, approval_id: str, signal: AbortSignal | None = None) -> BoxedAnswer:
        """Poll until an answer appears (cancellable through ``signal`` or the task).

        While it waits, a ``<id>.wait`` marker names this process, so ``tether approvals``
        can tell an approval someone is waiting for from one left by a process that died.
        """
        marker = self._marker(approval_id)
        self.directory.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname()}))
        try:
            while True:
                answer = await asyncio.to_thread(self.get, approval_id)
                if answer is not None:
                    return answer
                if signal is not None and signal.aborted:
                    raise asyncio.CancelledError
                await asyncio.sleep(POLL_SECONDS)
        finally:
            marker.unlink(missing_ok=True)

    def _marker(self, approval_id: str) -> Path:
        return self._path(approval_id).with_suffix(".wait")

    def is_waited(self, approval_id: str) -> bool:
        """Whether a live process waits for this answer (a process on another host is
        assumed alive: its liveness cannot be checked from here)."""
        try:
            raw = json.loads(self._marker(approval_id).read_text())
        except (FileNotFoundError, ValueError):
            return False
        if not isinstance(raw, dict) or not isinstance(raw.get("pid"), int):
            return False
        if raw.get("host") != socket.gethostname():
            return True
        try:
            os.kill(raw["pid"], 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


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


async def answer_pending(
    persistence: Persistence, box: AnswerBox, approval_id: str, outcome: str, by: str
) -> PendingRow:
    """Answer one pending approval; a stale or unknown id is refused with a clear error."""
    for row in await pending_approvals(persistence, box):
        if row.id == approval_id:
            if not row.waiting:
                raise ApprovalStaleError(
                    f"approval {approval_id} is pending in the log, but no running process "
                    "waits for an answer from the store (it was answered elsewhere, or its "
                    "process is gone; a repair or resume closes it as unavailable)"
                )
            box.put(approval_id, outcome, by)
            return row
    if box.get(approval_id) is not None:
        raise ApprovalAlreadyAnsweredError(f"approval {approval_id} was already answered")
    raise ApprovalNotPendingError(
        f"approval {approval_id} is not pending (already decided, or no such approval)"
    )
