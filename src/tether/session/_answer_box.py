"""Answering approvals from another process (``tether approvals``).

Pending approvals are read from the store itself: an ``approval/asked`` with no
``approval/decided`` in a session's raw log (what a crash-repairing load reports as
``unmatched_approvals``). The *answer box* beside the store (``PATH.db.answers/``,
``DIR/.answers/``) holds one wait marker per waiting approval, ``<id>.wait``, naming the waiting
process and its approval socket (:mod:`tether.session._answer_channel`). Answers travel only
through that socket, whose peer the kernel identifies; the box is a directory a confined
command might be able to write, so nothing in it is ever taken as an answer. A file there that
claims to answer a waiting approval (``<id>.json``, the format of earlier versions, or anything
else named ``<id>.*``) is reported as a refused answer. When an answer is taken, the waiter
leaves ``<id>.answered`` so a second answerer is told it came too late.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import socket
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from tether._signals import AbortSignal
from tether.errors import TetherError
from tether.session import Event, Persistence, SessionHeader
from tether.session._answer_channel import (
    ANSWERS,
    MESSAGE_LIMIT,
    ApprovalAlreadyAnsweredError,
    Offer,
    RefusalHandler,
    RefusedAnswer,
    listen,
    send_answer,
    serve_connection,
)
from tether.session._json import JsonValue, thaw
from tether.session._session import wall_clock_ms
from tether.session.persistence._factory import store_location

SCAN_SECONDS: Final = 0.25
"""How often a waiter looks for answer files in the box (to report them, never to take them)."""
REFUSALS_RECORDED: Final = 20
"""Refused answers reported per wait; the last one reported says that later ones are not."""
FILE_READ_LIMIT: Final = 4096
MARKER: Final = ".wait"
ANSWERED: Final = ".answered"


class ApprovalNotPendingError(TetherError):
    code = "APPROVAL_NOT_PENDING"


class ApprovalStaleError(TetherError):
    """Pending in the log, but no live process waits for an answer from the store."""

    code = "APPROVAL_STALE"


class ApprovalOnOtherHostError(TetherError):
    """The waiting process runs on another machine: its socket is not reachable from here."""

    code = "APPROVAL_ON_OTHER_HOST"


class InvalidAnswerError(TetherError):
    code = "INVALID_ANSWER"


class AnswerBoxError(TetherError):
    """The answer box cannot hold this wait's marker."""

    code = "ANSWER_BOX_UNUSABLE"


@dataclass(frozen=True, slots=True)
class BoxedAnswer:
    outcome: str
    by: str
    at: int


@dataclass(frozen=True, slots=True)
class WaitMarker:
    pid: int
    host: str
    socket: str
    """The abstract socket's name (without the leading NUL)."""


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


class AnswerBox:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @classmethod
    def for_store(cls, url: str) -> AnswerBox:
        scheme, path = store_location(url)
        return cls(
            path / ".answers" if scheme == "jsonl" else path.with_name(path.name + ".answers")
        )

    def _path(self, approval_id: str, suffix: str) -> Path:
        if not approval_id or "/" in approval_id or approval_id.startswith("."):
            raise ApprovalNotPendingError(f"{approval_id!r} is not an approval id")
        return self.directory / f"{approval_id}{suffix}"

    # -- the waiting side ------------------------------------------------------------------
    async def wait(
        self,
        approval_id: str,
        *,
        on_refused: RefusalHandler,
        on_waiting: Callable[[], None] | None = None,
        signal: AbortSignal | None = None,
    ) -> BoxedAnswer:
        """Listen until a checked surface answers (cancellable through ``signal`` or the
        task). ``on_waiting`` runs once the marker is up (an answer can be given from then
        on). Every answer that counts for nothing goes to ``on_refused`` (at most
        :data:`REFUSALS_RECORDED` of them) and never ends the wait."""
        refusals = _Refusals(on_refused)
        seen: set[tuple[str, FileIdentity]] = set()
        refusals.add_all(await asyncio.to_thread(self._scan, approval_id, None, seen))
        taken: asyncio.Future[Offer] = asyncio.get_running_loop().create_future()

        def take(offer: Offer) -> bool:
            if taken.done():
                return False
            taken.set_result(offer)
            return True

        sock, name = listen()
        connections: set[asyncio.Task[None]] = set()

        async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            connections.add(task)
            try:
                await serve_connection(reader, writer, approval_id, take, refusals.add)
            finally:
                connections.discard(task)

        server = await asyncio.start_unix_server(on_connection, sock=sock, limit=MESSAGE_LIMIT)
        try:
            ours = self._write_marker(approval_id, WaitMarker(os.getpid(), _host(), name))
            try:
                if on_waiting is not None:
                    on_waiting()
                while not taken.done():
                    if signal is not None and signal.aborted:
                        raise asyncio.CancelledError
                    await asyncio.wait({taken}, timeout=SCAN_SECONDS)
                    found = await asyncio.to_thread(self._scan, approval_id, ours, seen)
                    refusals.add_all(found)
            finally:
                self._remove_marker(approval_id, ours)
        finally:
            server.close()
            for task in list(connections):
                task.cancel()
        offer = taken.result()
        answer = BoxedAnswer(offer.outcome, offer.answered_by, wall_clock_ms())
        self._leave_answered(approval_id, answer)
        return answer

    def prepare(self) -> None:
        """Create the box directory (0700) if it is missing. The harness does this before any
        command runs, so the sandbox hides a directory that already exists."""
        try:
            with contextlib.suppress(FileExistsError):
                self.directory.mkdir(mode=0o700, parents=True)
            if self.directory.is_symlink() or not self.directory.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, "not a directory")
        except OSError as err:
            raise AnswerBoxError(
                f"cannot use the answer box {self.directory} ({err.strerror or err}): move "
                "or remove what is there, or use another store"
            ) from err

    def _write_marker(self, approval_id: str, marker: WaitMarker) -> FileIdentity:
        """Create ``<id>.wait`` afresh (never through a planted file or link); its identity."""
        path = self._path(approval_id, MARKER)
        data = json.dumps({"pid": marker.pid, "host": marker.host, "socket": marker.socket})
        self.prepare()
        for _ in range(3):
            try:
                path.unlink(missing_ok=True)  # planted before the wait began: already reported
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            except FileExistsError:
                continue
            except OSError as err:
                raise _unusable(path, err.strerror or str(err)) from err
            with os.fdopen(fd, "w") as handle:
                handle.write(data)
                handle.flush()  # the identity includes the change time of the written file
                st = os.fstat(handle.fileno())
            return _identity(st)
        raise _unusable(path, "something keeps replacing it")

    def _remove_marker(self, approval_id: str, ours: FileIdentity) -> None:
        path = self._path(approval_id, MARKER)
        try:
            st = path.lstat()
            if _identity(st) == ours:
                path.unlink()
        except OSError:
            pass  # gone already; a replaced marker was reported and is left as evidence

    def _leave_answered(self, approval_id: str, answer: BoxedAnswer) -> None:
        try:
            fd = os.open(
                self._path(approval_id, ANSWERED),
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                0o600,
            )
        except OSError:
            return  # only tells late answerers why; a planted one was reported by the scan
        with os.fdopen(fd, "w") as handle:
            json.dump({"outcome": answer.outcome, "by": answer.by, "at": answer.at}, handle)

    def _scan(
        self,
        approval_id: str,
        ours: FileIdentity | None,
        seen: set[tuple[str, FileIdentity]],
    ) -> list[RefusedAnswer]:
        """Each file that claims to answer ``approval_id``, once per file (runs in a thread:
        the box may be on a slow filesystem)."""
        try:
            entries = [e for e in os.scandir(self.directory) if e.name.startswith(approval_id)]
        except OSError:
            return []
        found = []
        marker = f"{approval_id}{MARKER}"
        for entry in entries:
            if not entry.name.startswith(f"{approval_id}."):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            key = (entry.name, _identity(st))
            if key in seen or (entry.name == marker and key[1] == ours):
                continue
            seen.add(key)
            found.append(
                RefusedAnswer(
                    "answer-box",
                    "no-proof",
                    "a file in the answer box is never an answer: answers come only from "
                    "`tether approvals answer`, through the waiting run's socket",
                    file=entry.name,
                    claimed_outcome=_claimed_outcome(Path(entry.path)),
                )
            )
        return found

    # -- the answering side ----------------------------------------------------------------
    def marker(self, approval_id: str) -> WaitMarker | None:
        raw = _read_small_json(self._path(approval_id, MARKER))
        if not isinstance(raw, dict):
            return None
        pid, host, name = raw.get("pid"), raw.get("host"), raw.get("socket")
        if not (isinstance(pid, int) and isinstance(host, str) and isinstance(name, str)):
            return None
        return WaitMarker(pid, host, name)

    def is_waited(self, approval_id: str) -> bool:
        """Whether a live process waits for this answer (a process on another host is
        assumed alive: its liveness cannot be checked from here)."""
        marker = self.marker(approval_id)
        if marker is None:
            return False
        if marker.host != _host():
            return True
        try:
            os.kill(marker.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def was_answered(self, approval_id: str) -> bool:
        return self._path(approval_id, ANSWERED).exists()

    def deliver(self, approval_id: str, outcome: str, surface: str) -> str:
        """Hand an answer to the process waiting for it; the ``answered_by`` it recorded."""
        if outcome not in ANSWERS:
            raise InvalidAnswerError(f"an answer is one of {', '.join(ANSWERS)}")
        marker = self.marker(approval_id)
        if marker is None:
            raise ApprovalStaleError(_stale_text(approval_id))
        if marker.host != _host():
            raise ApprovalOnOtherHostError(
                f"approval {approval_id} waits in process {marker.pid} on host {marker.host}: "
                "answer it there (`tether approvals answer` reaches only this machine's runs)"
            )
        return send_answer(marker.socket, marker.pid, approval_id, outcome, surface)


class _Refusals:
    def __init__(self, handler: RefusalHandler) -> None:
        self.handler = handler
        self.count = 0

    def add_all(self, found: list[RefusedAnswer]) -> None:
        for refused in found:
            self.add(refused)

    def add(self, refused: RefusedAnswer) -> None:
        self.count += 1
        if self.count < REFUSALS_RECORDED:
            self.handler(refused)
        elif self.count == REFUSALS_RECORDED:
            self.handler(
                replace(
                    refused,
                    detail=refused.detail + " (later refused answers to this "
                    "approval are not recorded)",
                )
            )


FileIdentity = tuple[int, int, int]
"""Device, inode and change time: a file removed and created again may get the same inode
number, never the same change time (which no process can set)."""


def _identity(st: os.stat_result) -> FileIdentity:
    return st.st_dev, st.st_ino, st.st_ctime_ns


def _unusable(marker: Path, problem: str) -> AnswerBoxError:
    return AnswerBoxError(
        f"cannot create the wait marker {marker} ({problem}): nobody could answer, so the ask "
        "is unavailable; keep the store where the agent's commands cannot write"
    )


def _host() -> str:
    return socket.gethostname()


def _read_small_json(path: Path) -> object:
    """A small regular file's JSON, or ``None``: never follows a link, never blocks on a FIFO,
    never reads more than :data:`FILE_READ_LIMIT` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, FILE_READ_LIMIT + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > FILE_READ_LIMIT:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


def _claimed_outcome(path: Path) -> str | None:
    raw = _read_small_json(path)
    outcome = raw.get("outcome") if isinstance(raw, dict) else None
    return outcome if outcome in ANSWERS else None


def _stale_text(approval_id: str) -> str:
    return (
        f"approval {approval_id} is pending in the log, but no running process waits for an "
        "answer from the store (it was answered elsewhere, or its process is gone; a repair "
        "or resume closes it as unavailable)"
    )


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


async def answer_pending(
    persistence: Persistence, box: AnswerBox, approval_id: str, outcome: str, surface: str
) -> tuple[PendingRow, str]:
    """Answer one pending approval: the row and the ``answered_by`` the run recorded. A stale,
    unknown, or already answered id is refused with a clear error."""
    for row in await pending_approvals(persistence, box):
        if row.id == approval_id:
            if not row.waiting:
                if box.was_answered(approval_id):
                    raise ApprovalAlreadyAnsweredError(
                        f"approval {approval_id} was already answered"
                    )
                raise ApprovalStaleError(_stale_text(approval_id))
            return row, box.deliver(approval_id, outcome, surface)
    if box.was_answered(approval_id):
        raise ApprovalAlreadyAnsweredError(f"approval {approval_id} was already answered")
    raise ApprovalNotPendingError(
        f"approval {approval_id} is not pending (already decided, or no such approval)"
    )
