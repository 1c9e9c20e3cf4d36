"""JSONL persistence: one directory per session, one JSON line per event.

Layout: ``<root>/<escaped-id>/session.jsonl`` whose line 1 is the header
(:meth:`SessionHeader.to_dict`) and every later line one event (:meth:`Event.to_json`), plus an
empty ``session.lock`` used with ``flock``. Design points:

- **Atomic creation.** The header is written and fsynced in a hidden temporary directory that
  is then renamed into place, so a half-created session never shows, and of two processes
  creating one id exactly one succeeds.
- **Durable appends.** Every append is written in one go at the end of the last whole line and
  fsynced before it returns. A deferred append (``DefersSync``: the session store's
  write-behind batches) is written the same way and fsynced later: by the session's next
  durable append or ``sync``, the backend's own sync within ``SYNC_WITHIN`` seconds, or
  ``close``. A creation is always durable: a rename that reached the disk before the file's
  content would publish a session whose header is missing.
- **Several processes.** Appends and repairs hold an exclusive ``flock`` on the session's lock
  file and check the batch continues the stored length, so of two racing writers the loser
  gets :class:`SeqConflictError`. Each instance caches each session's length and file size,
  and re-reads the file whenever its size or inode no longer match (another writer was there).
- **Torn tails.** A crash mid-write can leave an unterminated or unparseable final line. Load
  and append drop it durably (truncate and fsync); inspect drops it in memory only.
"""

from __future__ import annotations

import builtins
import errno
import fcntl
import json
import math
import os
import shutil
import string
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import unquote

from tether.session._events import Event, plain_record_text
from tether.session._header import InvalidHeaderError, SessionHeader
from tether.session.persistence._base import (
    CorruptLogError,
    PersistenceError,
    SessionExistsError,
    SessionNotFoundError,
    StoredSession,
)
from tether.session.persistence._codec import (
    check_continues,
    decode_log,
    dumps,
    event_line,
    gc_paused,
    is_complete_record,
    loads,
)
from tether.session.persistence._disk_full import disk_full_message, is_disk_full
from tether.session.persistence._repair import plan_repair
from tether.session.persistence._worker import Worker, WorkerBackend

LOG_NAME: Final = "session.jsonl"
LOCK_NAME: Final = "session.lock"

_SAFE: Final = frozenset(string.ascii_letters + string.digits + "-_")


def escape_id(session_id: str) -> str:
    """Directory name for a session id: letters, digits, ``-`` and ``_`` kept, the rest as
    ``%XX`` per UTF-8 byte. Never empty, never starts with ``.``, never contains ``/``."""
    return "".join(
        char
        if char in _SAFE
        else "".join(f"%{b:02X}" for b in char.encode("utf-8", "surrogatepass"))
        for char in session_id
    )


@dataclass(frozen=True, slots=True)
class _Tail:
    inode: int
    size: int
    length: int


class JsonlPersistence(WorkerBackend):
    """Sessions as JSONL files under ``root`` (created on first ``create``)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._worker = Worker(
            "tether-jsonl", f"JSONL store {self.root}", explain=self._explain_full
        )
        self._need = 0  # bytes the write in progress adds; worker only
        self._tails: dict[str, _Tail] = {}  # worker thread only
        self._unsynced: set[str] = set()  # sessions with deferred appends; worker only

    def __repr__(self) -> str:
        return f"JsonlPersistence({str(self.root)!r})"

    def _explain_full(self, err: Exception) -> PersistenceError | None:
        if not is_disk_full(err):
            return None
        return PersistenceError(
            disk_full_message(f"JSONL store {self.root}", str(self.root), self._need)
        )

    def session_dir(self, session_id: str) -> Path:
        return self.root / escape_id(session_id)

    def log_path(self, session_id: str) -> Path:
        return self.session_dir(session_id) / LOG_NAME

    # -- worker-thread side ---------------------------------------------------------------
    def _release(self) -> None:
        self._tails.clear()
        self._unsynced.clear()

    def _sync(self, session_id: str) -> None:
        if session_id not in self._unsynced:
            return
        fd = os.open(self.log_path(session_id), os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._unsynced.discard(session_id)

    def _sync_all(self) -> None:
        for session_id in list(self._unsynced):
            self._sync(session_id)

    def _open(self) -> None:
        if not self.root.is_dir():
            self.root.mkdir(parents=True, exist_ok=True)
            _fsync_dir(self.root.parent)  # the new root's own entry must survive a crash too

    def _create(self, header: SessionHeader, first: tuple[Event, ...], *, sync: bool) -> None:
        del sync  # always durable (module docstring)
        self._open()
        final = self.session_dir(header.id)
        if (final / LOG_NAME).exists():
            raise SessionExistsError(f"session {header.id!r} already exists")
        # The first events go into the staged file too: the rename publishes both or neither.
        line = (dumps(header.to_dict()) + "\n").encode("utf-8")
        line += b"".join(event_line(event) for event in first)
        self._need = len(line)
        staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.root))
        try:
            fd = os.open(staging / LOG_NAME, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                _write_at(fd, line, 0)
                os.fsync(fd)
                inode = os.fstat(fd).st_ino
            finally:
                os.close(fd)
            os.close(os.open(staging / LOCK_NAME, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            _fsync_dir(staging)
            try:
                # Renaming a directory never replaces a non-empty one: exactly one of two
                # racing creators wins.
                os.rename(staging, final)
            except OSError as err:
                if err.errno in (errno.EEXIST, errno.ENOTEMPTY):
                    raise SessionExistsError(f"session {header.id!r} already exists") from err
                raise
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        _fsync_dir(self.root)
        self._tails[header.id] = _Tail(inode, len(line), len(first))

    def _append(self, session_id: str, events: Sequence[Event], *, sync: bool) -> None:
        payload = b"".join(event_line(event) for event in events)
        self._need = len(payload)
        directory = self.session_dir(session_id)
        if not (directory / LOG_NAME).is_file():
            raise SessionNotFoundError(f"session {session_id!r} not found")
        with _locked(directory, exclusive=True):
            fd = os.open(directory / LOG_NAME, os.O_RDWR)
            try:
                length, end = self._stored_tail(session_id, fd)
                first = events[0].seq
                check_continues(session_id, first, length)
                self._write(session_id, fd, end, payload, length + len(events), sync=sync)
            finally:
                os.close(fd)

    def _write(
        self, session_id: str, fd: int, end: int, payload: bytes, length: int, *, sync: bool
    ) -> None:
        try:
            _write_at(fd, payload, end)
            if sync:
                os.fsync(fd)  # every deferred write before it too: one file per session
        except BaseException:
            # Leave no partial batch behind: all or nothing.
            self._tails.pop(session_id, None)
            with suppress(OSError):
                os.ftruncate(fd, end)
                os.fsync(fd)
            raise
        if sync:
            self._unsynced.discard(session_id)
        else:
            self._unsynced.add(session_id)
        self._tails[session_id] = _Tail(os.fstat(fd).st_ino, end + len(payload), length)

    def _stored_tail(self, session_id: str, fd: int) -> tuple[int, int]:
        """Stored event count and the byte offset where the next line goes.

        Trusts the cache while the file is the one this instance last wrote; otherwise
        re-reads it, dropping a torn tail durably before anything is appended after it.
        """
        stat = os.fstat(fd)
        cached = self._tails.get(session_id)
        if cached is not None and (cached.inode, cached.size) == (stat.st_ino, stat.st_size):
            return cached.length, cached.size
        data = _read_all(fd)
        header_end = _header_end(session_id, data)
        length, end = _scan_tail(session_id, data, header_end)
        if end < len(data):
            os.ftruncate(fd, end)
            os.fsync(fd)
        self._tails[session_id] = _Tail(stat.st_ino, end, length)
        return length, end

    def _read(self, session_id: str, *, repair: bool) -> StoredSession:
        directory = self.session_dir(session_id)
        path = directory / LOG_NAME
        if not path.is_file():
            raise SessionNotFoundError(f"session {session_id!r} not found")
        with gc_paused(), _locked(directory, exclusive=repair):
            with open(path, "rb") as file:
                data = file.read()
            header_end = _header_end(session_id, data)
            header = _parse_header(session_id, data[: header_end - 1])
            last = data.rfind(b"\n") + 1  # the header's newline at least
            fragment = last < len(data)  # a record without its newline: torn
            try:
                # One decode of every complete line, not one per line: the same text, as
                # UTF-8 cannot hide a newline byte inside a character.
                text = str(memoryview(data)[header_end:last], "utf-8")
            except UnicodeDecodeError:  # some line is damaged: each is judged alone
                lines = data[header_end:last].split(b"\n")
                lines.pop()
                decoded = decode_log(session_id, lines, _line_event, _line_where)
            else:
                texts = text.split("\n")
                texts.pop()
                del text
                decoded = decode_log(session_id, texts, _text_line_event, _line_where)
            torn = decoded.torn + (1 if fragment else 0)
            closers, report = plan_repair(decoded.events, torn)
            if repair and report.changed:
                kept = len(decoded.events)
                end = last  # back over the complete lines that are torn, to the kept ones' end
                for _ in range(decoded.torn):
                    end = data.rindex(b"\n", header_end - 1, end - 1) + 1
                payload = b"".join(event_line(event) for event in closers)
                fd = os.open(path, os.O_RDWR)
                try:
                    os.ftruncate(fd, end)
                    self._write(session_id, fd, end, payload, kept + len(closers), sync=True)
                finally:
                    os.close(fd)
        return StoredSession(header, (*decoded.events, *closers), report)

    def _list_ids(self) -> builtins.list[str]:
        if not self.root.is_dir():
            return []
        found: builtins.list[tuple[float, str]] = []
        with os.scandir(self.root) as entries:
            for entry in entries:
                path = os.path.join(entry.path, LOG_NAME)
                if entry.name.startswith(".") or not entry.is_dir() or not os.path.exists(path):
                    continue
                found.append((_created_at_hint(path), unquote(entry.name, errors="surrogatepass")))
        # Oldest first, like ``list``; an unreadable header sorts last instead of failing.
        return [session_id for _, session_id in sorted(found)]

    def _list(self) -> builtins.list[SessionHeader]:
        if not self.root.is_dir():
            return []
        headers: builtins.list[SessionHeader] = []
        with os.scandir(self.root) as entries:
            for entry in entries:
                if entry.name.startswith(".") or not entry.is_dir():
                    continue  # staging directories and strays
                try:
                    with open(os.path.join(entry.path, LOG_NAME), "rb") as file:
                        first = file.readline()
                except FileNotFoundError:
                    continue
                if not first.endswith(b"\n"):
                    raise CorruptLogError(f"{entry.path}: header line is incomplete")
                headers.append(_parse_header(None, first[:-1], where=entry.path))
        headers.sort(key=lambda header: (header.created_at, header.id))
        return headers


def _created_at_hint(path: str) -> float:
    """The header's ``created_at`` for ordering only (not validated); unreadable → last."""
    try:
        with open(path, "rb") as file:
            value = json.loads(file.readline()).get("created_at")
    except (OSError, ValueError, AttributeError):
        return math.inf
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else math.inf


@contextmanager
def _locked(directory: Path, *, exclusive: bool) -> Iterator[None]:
    """Hold the session's ``flock``: exclusive to write, shared to read.

    A reader never creates the lock file (inspect writes nothing); without one, it reads
    unlocked and treats a half-written final line as torn, in memory only.
    """
    path = directory / LOCK_NAME
    try:
        fd = (
            os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            if exclusive
            else os.open(path, os.O_RDONLY)
        )
    except FileNotFoundError:
        if exclusive:
            raise
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # releases the lock


def _header_end(session_id: str, data: bytes) -> int:
    newline = data.find(b"\n")
    if newline < 0:
        raise CorruptLogError(f"session {session_id!r}: header line is incomplete")
    return newline + 1


def _parse_header(session_id: str | None, line: bytes, where: str | None = None) -> SessionHeader:
    label = where or f"session {session_id!r}"
    try:
        raw = loads(line.decode("utf-8"))
    except (ValueError, RecursionError) as err:
        raise CorruptLogError(f"{label}: header line is not JSON: {err}") from err
    try:
        header = SessionHeader.from_dict(raw)
    except InvalidHeaderError as err:
        raise CorruptLogError(f"{label}: invalid header: {err}") from err
    if session_id is not None and header.id != session_id:
        raise CorruptLogError(f"{label}: header names session {header.id!r}")
    return header


def _parse_line(line: bytes) -> object:
    return loads(line.decode("utf-8"))


def _line_event(line: bytes) -> Event:
    return _text_line_event(line.decode("utf-8"))


def _text_line_event(text: str) -> Event:
    event = plain_record_text(text)
    return event if event is not None else Event.from_dict(loads(text))


def _line_where(index: int) -> str:
    return f"line {index + 2}"  # the header is line 1


def _scan_tail(session_id: str, data: bytes, header_end: int) -> tuple[int, int]:
    """Event count and end offset after dropping trailing invalid lines (walking backwards)."""
    end = data.rfind(b"\n") + 1
    while end > header_end:
        start = data.rfind(b"\n", 0, end - 1) + 1
        try:
            raw = _parse_line(data[start : end - 1])
        except (ValueError, RecursionError):
            raw = None
        if isinstance(raw, dict) and is_complete_record(raw):
            length = data.count(b"\n", header_end, end)
            if raw.get("seq") != length - 1:
                raise CorruptLogError(
                    f"session {session_id!r}: line {length + 1}: expected seq {length - 1}, "
                    f"found seq {raw.get('seq')!r} (events are missing or out of order)"
                )
            return length, end
        end = start
    return 0, header_end


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _write_at(fd: int, payload: bytes, offset: int) -> None:
    view = memoryview(payload)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["LOCK_NAME", "LOG_NAME", "JsonlPersistence", "escape_id"]
