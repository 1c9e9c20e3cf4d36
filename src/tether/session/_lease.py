"""Session leases: which sessions are live in some process, with no heartbeat to miss.

A process that makes a session live (:meth:`SessionStore.enter`) takes the session's lease:
an exclusive ``flock`` on ``<leases>/<id>.lease`` beside the store, held while the session is
live and released by the kernel when the process dies, however it dies. So

* a second process that tries to make the same session live is refused at once
  (:class:`SessionLiveError`), instead of both appending and one of them failing later with
  ``SEQ_CONFLICT``;
* a command that changes stored sessions from outside (``tether sessions narrow``,
  ``tether sessions fsck --repair``) can tell a live session from an idle or crashed one
  (:meth:`Leases.holder`) and leave live ones alone.

A lease is taken with a create-lock-verify loop and released by unlinking before closing, so
a file unlinked by a releasing holder is never mistaken for the lease. Lease files of a
process that crashed stay behind, unlocked: they mean nothing. A process forked from the
holder closes its copies at once (a copy would keep the lease after the holder died).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import quote

from tether.errors import TetherError
from tether.session.persistence._factory import store_location


class SessionLiveError(TetherError):
    """The session is live in another process (or in another store of this one)."""

    code = "SESSION_LIVE"


class LeaseUnavailableError(TetherError):
    """The lease directory or file cannot be used (permissions, a file in the way, ...)."""

    code = "LEASE_UNAVAILABLE"


TAKE_PATIENCE: Final = 0.1
"""Seconds :meth:`Leases.take` keeps trying a held lease before it says the session is live:
a checker (:meth:`Leases.holder`) holds a shared lock for a few microseconds, and a taker
that met one must not report a live session that is not."""


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds a lease, as the holder wrote it (``pid`` 0 when it could not be read)."""

    pid: int
    host: str

    def describe(self) -> str:
        if not self.pid:
            return "another process"
        here = self.host == socket.gethostname()
        return f"process {self.pid}" + ("" if here else f" on {self.host}")


class Lease:
    """One held lease; :meth:`release` (idempotent) gives it up."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd
        _held.add(self)

    def release(self) -> None:
        if self._fd < 0:
            return
        if _same_file(self._fd, self.path):  # never another holder's file (say, recreated)
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()  # before closing: see the module docstring
        self.drop()

    def drop(self) -> None:
        """Close the descriptor without unlinking (a forked child's copy)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        _held.discard(self)


class Leases:
    """The lease directory of one store."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @classmethod
    def for_store(cls, url: str) -> Leases:
        scheme, path = store_location(url)
        path = path.resolve()  # one store, one lease directory, however it is spelled
        return cls(path / ".leases" if scheme == "jsonl" else path.with_name(path.name + ".leases"))

    def in_use(self) -> bool:
        """Whether sessions of this store have ever been run with leases (without them, no
        session can be told live)."""
        return self.directory.is_dir()

    def _path(self, session_id: str) -> Path:
        return self.directory / f"{quote(session_id, safe='')}.lease"

    def take(self, session_id: str) -> Lease:
        """Take ``session_id``'s lease; :class:`SessionLiveError` when another holds it,
        :class:`LeaseUnavailableError` when the lease cannot be used at all."""
        path = self._path(session_id)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = self._lock(path, time.monotonic() + TAKE_PATIENCE)
            if fd < 0:
                raise SessionLiveError(
                    f"session {session_id!r} is live in {self._holder_at(path).describe()}"
                )
            record = json.dumps({"pid": os.getpid(), "host": socket.gethostname()}).encode()
            os.ftruncate(fd, 0)
            os.pwrite(fd, record, 0)
        except OSError as err:
            raise LeaseUnavailableError(f"cannot take the lease {path}: {err}") from err
        return Lease(path, fd)

    def _lock(self, path: Path, deadline: float) -> int:
        """The exclusively locked lease file at ``path`` (create, lock, verify it is still the
        file at the path), or -1 when another holds it past ``deadline``."""
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                if time.monotonic() >= deadline:
                    return -1
                time.sleep(0.002)
                continue
            except BaseException:
                os.close(fd)
                raise
            if _same_file(fd, path):
                return fd
            os.close(fd)  # a releasing holder unlinked it between our open and our lock

    def _holder_at(self, path: Path) -> Holder:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return Holder(0, "")
        try:
            return _read_holder(fd)
        finally:
            os.close(fd)

    def holder(self, session_id: str) -> Holder | None:
        """Who holds ``session_id``'s lease, or ``None`` when the session is not live."""
        path = self._path(session_id)
        while True:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                return None
            except OSError as err:
                raise LeaseUnavailableError(f"cannot read the lease {path}: {err}") from err
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return _read_holder(fd)
            else:
                # Unlocked: not live, unless this is a file a releasing holder unlinked
                # while a new taker locked the one now at the path. Look again then.
                if _same_file(fd, path) or not path.exists():
                    return None
            finally:
                os.close(fd)  # also releases the shared lock, if we got it


def _same_file(fd: int, path: Path) -> bool:
    try:
        on_disk = path.stat()
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (on_disk.st_dev, on_disk.st_ino)


def _read_holder(fd: int) -> Holder:
    try:
        raw = json.loads(os.pread(fd, 4096, 0))
        return Holder(int(raw["pid"]), str(raw["host"]))
    except (OSError, ValueError, KeyError, TypeError):
        return Holder(0, "")  # being written, or not ours to read: still held


_held: weakref.WeakSet[Lease] = weakref.WeakSet()


def _drop_inherited() -> None:
    for lease in list(_held):
        lease.drop()


os.register_at_fork(after_in_child=_drop_inherited)

__all__ = [
    "TAKE_PATIENCE",
    "Holder",
    "Lease",
    "LeaseUnavailableError",
    "Leases",
    "SessionLiveError",
]
