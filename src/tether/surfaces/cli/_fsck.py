"""Checking stored sessions for crash damage, and repairing what load can repair.

Checking uses the backend's non-mutating ``inspect``, whose :class:`RepairReport` says what
``load`` would do: drop a torn tail, close an interrupted turn, and which ``approval/asked`` ids
have no decision. Repairing calls ``load`` (which repairs durably) and then inspects again, so a
session is reported ``repaired`` only once the stored log is actually clean.

One unreadable session never stops the survey: every failure is caught per session and
reported with its code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from tether.session._lease import Leases, SessionLiveError
from tether.session.persistence._base import Persistence, RepairReport


class Status(StrEnum):
    """The verdict on one session."""

    OK = "ok"
    """Nothing to repair."""
    DAMAGED = "damaged"
    """Problems remain (not repaired, or repair could not fix them)."""
    REPAIRED = "repaired"
    """Problems were found and ``--repair`` fixed them durably."""
    UNREADABLE = "unreadable"
    """The session could not be read at all (corrupt log, unknown event type, bad version)."""
    LIVE = "live"
    """Live in another process (it holds the session's lease): an open turn there is work in
    progress, not damage, so it is neither checked nor repaired."""


class ProblemKind(StrEnum):
    """What can be wrong with a stored session."""

    TORN_TAIL = "torn-tail"
    """Trailing records a crash left incomplete; load drops them."""
    UNCLOSED_TURN = "unclosed-turn"
    """A turn the crash left open; load closes it with synthetic events."""
    UNMATCHED_APPROVAL = "unmatched-approval"
    """``approval/asked`` without ``approval/decided``: the crash fell between the two."""
    UNREADABLE = "unreadable"
    """Reading failed; ``code`` and ``message`` say why."""


@dataclass(frozen=True, slots=True)
class Problem:
    kind: ProblemKind
    dropped: int = 0
    """TORN_TAIL: how many records."""
    closers: tuple[str, ...] = ()
    """UNCLOSED_TURN: types of the events load adds, in order."""
    ids: tuple[str, ...] = ()
    """UNMATCHED_APPROVAL: the approval ids."""
    code: str = ""
    message: str = ""

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"kind": self.kind.value}
        if self.kind is ProblemKind.TORN_TAIL:
            out["records"] = self.dropped
        elif self.kind is ProblemKind.UNCLOSED_TURN:
            out["closers"] = list(self.closers)
        elif self.kind is ProblemKind.UNMATCHED_APPROVAL:
            out["ids"] = list(self.ids)
        else:
            out["code"] = self.code
            out["message"] = self.message
        return out

    def describe(self) -> str:
        if self.kind is ProblemKind.TORN_TAIL:
            noun = "record" if self.dropped == 1 else "records"
            return f"torn tail ({self.dropped} {noun})"
        if self.kind is ProblemKind.UNCLOSED_TURN:
            return f"unclosed turn (closers: {', '.join(self.closers)})"
        if self.kind is ProblemKind.UNMATCHED_APPROVAL:
            return f"unmatched approval ({', '.join(self.ids)})"
        return f"{self.code}: {self.message}"


@dataclass(frozen=True, slots=True)
class SessionCheck:
    session_id: str
    status: Status
    problems: tuple[Problem, ...] = ()
    """What the check found."""
    remaining: tuple[Problem, ...] = ()
    """What is still wrong after ``--repair`` (empty when repaired or not attempted)."""
    repaired: RepairReport | None = None
    """What ``load`` did, when ``--repair`` ran for this session."""
    live_in: str | None = None
    """The lease holder, for :attr:`Status.LIVE` (``process 1234``)."""

    @property
    def ok(self) -> bool:
        return self.status in (Status.OK, Status.REPAIRED, Status.LIVE)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "id": self.session_id,
            "status": self.status.value,
            "problems": [p.to_dict() for p in self.problems],
        }
        if self.repaired is not None:
            out["repaired"] = {
                "dropped_tail": self.repaired.dropped_tail,
                "synthesized": list(self.repaired.synthesized),
            }
            out["remaining"] = [p.to_dict() for p in self.remaining]
        if self.live_in is not None:
            out["live_in"] = self.live_in
        return out

    def describe(self) -> str:
        head = f"{self.session_id}: {self.status.value}"
        if self.status is Status.OK:
            return head
        if self.status is Status.LIVE:
            return f"{head} in {self.live_in} (not checked)"
        if self.status is Status.REPAIRED and self.repaired is not None:
            return f"{head}: {describe_repair(self.repaired)}"
        found = "; ".join(p.describe() for p in self.problems)
        if self.repaired is not None:
            left = "; ".join(p.describe() for p in self.remaining)
            return f"{head}: {found}; repair ({describe_repair(self.repaired)}) left: {left}"
        return f"{head}: {found}"


@dataclass(frozen=True, slots=True)
class FsckReport:
    sessions: tuple[SessionCheck, ...] = field(default=())
    repair: bool = False

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.sessions)

    def counts(self) -> dict[str, int]:
        counts = {status.value: 0 for status in Status}
        for check in self.sessions:
            counts[check.status.value] += 1
        return counts

    def to_dict(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "repair": self.repair,
            "counts": self.counts(),
            "sessions": [check.to_dict() for check in self.sessions],
        }

    def summary(self) -> str:
        total = len(self.sessions)
        noun = "session" if total == 1 else "sessions"
        parts = [f"{n} {status}" for status, n in self.counts().items() if n]
        return f"checked {total} {noun}: {', '.join(parts) if parts else 'nothing to check'}"


def describe_repair(report: RepairReport) -> str:
    """What ``load`` did, e.g. ``dropped 1 torn record; added step/end, turn/end``."""
    parts = []
    if report.dropped_tail:
        noun = "record" if report.dropped_tail == 1 else "records"
        parts.append(f"dropped {report.dropped_tail} torn {noun}")
    if report.synthesized:
        parts.append(f"added {', '.join(report.synthesized)}")
    return "; ".join(parts) or "nothing changed"


def problems_of(report: RepairReport) -> tuple[Problem, ...]:
    problems: list[Problem] = []
    if report.dropped_tail:
        problems.append(Problem(ProblemKind.TORN_TAIL, dropped=report.dropped_tail))
    if report.synthesized:
        problems.append(Problem(ProblemKind.UNCLOSED_TURN, closers=report.synthesized))
    if report.unmatched_approvals:
        problems.append(Problem(ProblemKind.UNMATCHED_APPROVAL, ids=report.unmatched_approvals))
    return tuple(problems)


def _unreadable(err: Exception) -> Problem:
    # Any failure, not only TetherError: a checker that dies on the first odd session (say an
    # OSError from a damaged file) would hide the state of all the others.
    code = getattr(err, "code", None)
    return Problem(
        ProblemKind.UNREADABLE,
        code=code if isinstance(code, str) else type(err).__name__,
        message=" ".join(str(err).splitlines()) or type(err).__name__,
    )


async def check_session(persistence: Persistence, session_id: str, *, repair: bool) -> SessionCheck:
    try:
        stored = await persistence.inspect(session_id)
    except Exception as err:
        problem = _unreadable(err)
        return SessionCheck(session_id, Status.UNREADABLE, (problem,))
    problems = problems_of(stored.repair)
    if not problems:
        return SessionCheck(session_id, Status.OK)
    if not repair:
        return SessionCheck(session_id, Status.DAMAGED, problems)
    try:
        loaded = await persistence.load(session_id)
    except Exception as err:
        left = (_unreadable(err),)
        return SessionCheck(session_id, Status.DAMAGED, problems, left, RepairReport())
    try:
        after = await persistence.inspect(session_id)
    except Exception as err:
        left = (_unreadable(err),)
        return SessionCheck(session_id, Status.DAMAGED, problems, left, loaded.repair)
    remaining = problems_of(after.repair)
    status = Status.DAMAGED if remaining else Status.REPAIRED
    return SessionCheck(session_id, status, problems, remaining, loaded.repair)


async def fsck(
    persistence: Persistence,
    session_ids: Sequence[str],
    *,
    repair: bool,
    leases: Leases | None = None,
) -> FsckReport:
    """Check (and with ``repair``, repair) each session; with ``leases``, sessions live in
    another process are reported as such and left alone."""
    checks = []
    for sid in session_ids:
        if leases is None:
            checks.append(await check_session(persistence, sid, repair=repair))
        elif not repair:
            holder = leases.holder(sid)
            checks.append(
                await check_session(persistence, sid, repair=False)
                if holder is None
                else SessionCheck(sid, Status.LIVE, live_in=holder.describe())
            )
        else:
            checks.append(await _check_holding_the_lease(persistence, sid, leases))
    return FsckReport(tuple(checks), repair)


async def _check_holding_the_lease(
    persistence: Persistence, session_id: str, leases: Leases
) -> SessionCheck:
    """Repair only while holding the session's lease: no process may start running it
    between the check and the repair's appends."""
    try:
        lease = leases.take(session_id)
    except SessionLiveError:
        holder = leases.holder(session_id)
        live_in = holder.describe() if holder is not None else "another process"
        return SessionCheck(session_id, Status.LIVE, live_in=live_in)
    try:
        return await check_session(persistence, session_id, repair=True)
    finally:
        lease.release()
