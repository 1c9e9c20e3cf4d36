"""Session leases: which sessions are live in some process, with no heartbeat to miss.

A process that makes a session live (:meth:`SessionStore.enter`) takes the session's lease,
held while the session is live and released by the kernel when the process dies, however it
dies. So

* a second process that tries to make the same session live is refused at once
  (:class:`SessionLiveError`), instead of both appending and one of them failing later with
  ``SEQ_CONFLICT``;
* a command that changes stored sessions from outside (``tether sessions narrow``,
  ``tether sessions fsck --repair``) can tell a live session from an idle or crashed one
  (:meth:`Leases.holder`) and leave live ones alone.

A lease is a byte-range lock in one file per store, ``<leases>/sessions.lock``, taken as an
open-file-description lock (``F_OFD_SETLK``): it belongs to the descriptor, not the process,
so two stores of one process exclude each other too, and the kernel drops it when the last
copy of the descriptor closes. Each session has its own range, at a slot derived from its id
(:func:`_slot`): the range starts at the slot's first byte, which every holder's range covers
(so two holders of one session conflict), and ends at a byte that encodes the holder's pid,
which :meth:`Leases.holder` reads back from the conflicting lock (``F_OFD_GETLK``).

Taking or releasing a lease is one non-blocking ``fcntl`` on a descriptor each
:class:`Leases` opens once: nothing is created, written, unlinked or closed per session, and
nothing waits for the disk, so a lease costs the hot path (a new session, its end) a few
microseconds wherever it is called. A process forked from the holder closes its copies at once
(a copy would keep the leases after the holder died).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import struct
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tether.errors import TetherError
from tether.session.persistence._factory import store_location


class SessionLiveError(TetherError):
    """The session is live in another process (or in another store of this one)."""

    code = "SESSION_LIVE"


class LeaseUnavailableError(TetherError):
    """The lease directory or file cannot be used (permissions, a file in the way, ...)."""

    code = "LEASE_UNAVAILABLE"


LOCK_NAME: Final = "sessions.lock"
"""The lock file in a store's lease directory."""

_PID_BITS: Final = 22
"""A Linux pid is below ``2**22`` (``PID_MAX_LIMIT`` on 64-bit)."""
_SLOT_BITS: Final = 63 - _PID_BITS - 1
"""Slots fill the rest of a signed 64-bit offset: two live sessions share one with a chance
of about ``n**2 / 2**42`` for ``n`` live sessions in a store, and a shared slot only refuses
(``SESSION_LIVE``), it never lets two holders in."""

_FLOCK: Final = struct.Struct("hhqqi")
"""``struct flock`` on Linux (64-bit ``off_t``): type, whence, start, length, pid."""


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds a lease (``pid`` 0 when it cannot be told). A byte-range lock is held on
    this machine's kernel, so the holder is always a process of this host."""

    pid: int

    def describe(self) -> str:
        return f"process {self.pid}" if self.pid else "another process"


class Lease:
    """One held lease; :meth:`release` (idempotent) gives it up."""

    def __init__(self, leases: Leases, start: int, length: int) -> None:
        self._leases: Leases | None = leases
        self._start = start
        self._length = length

    def release(self) -> None:
        leases, self._leases = self._leases, None
        if leases is not None:
            leases._unlock(self._start, self._length)


class Leases:
    """The lease directory of one store (see the module docstring)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._fd = -1  # the descriptor this instance's leases are held on
        self._query_fd = -1  # another descriptor, which sees this instance's leases too
        # The slots held here: a descriptor's locks never conflict with its own.
        self._held: set[int] = set()
        _open.add(self)

    @classmethod
    def for_store(cls, url: str) -> Leases:
        scheme, path = store_location(url)
        path = path.resolve()  # one store, one lease directory, however it is spelled
        return cls(path / ".leases" if scheme == "jsonl" else path.with_name(path.name + ".leases"))

    @property
    def path(self) -> Path:
        return self.directory / LOCK_NAME

    def in_use(self) -> bool:
        """Whether sessions of this store have ever been run with leases (without them, no
        session can be told live)."""
        return self.directory.is_dir()

    def take(self, session_id: str) -> Lease:
        """Take ``session_id``'s lease; :class:`SessionLiveError` when another holds it,
        :class:`LeaseUnavailableError` when the lease cannot be used at all."""
        start = _slot(session_id) << _PID_BITS
        length = os.getpid() % (1 << _PID_BITS) + 1
        if start in self._held:
            raise SessionLiveError(f"session {session_id!r} is live in process {os.getpid()}")
        try:
            if self._fd < 0:
                self._fd = self._open(os.O_RDWR | os.O_CREAT)
            try:
                _fcntl(self._fd, fcntl.F_OFD_SETLK, fcntl.F_WRLCK, start, length)
            except OSError as err:
                if err.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                holder = self._holder_at(start) or Holder(0)
                raise SessionLiveError(
                    f"session {session_id!r} is live in {holder.describe()}"
                ) from None
        except OSError as err:
            raise LeaseUnavailableError(
                f"cannot take the lease of session {session_id!r} in {self.path}: {err}"
            ) from err
        self._held.add(start)
        return Lease(self, start, length)

    def holder(self, session_id: str) -> Holder | None:
        """Who holds ``session_id``'s lease, or ``None`` when the session is not live."""
        if not self.path.exists():
            return None
        try:
            return self._holder_at(_slot(session_id) << _PID_BITS)
        except OSError as err:
            raise LeaseUnavailableError(f"cannot read the lease file {self.path}: {err}") from err

    def _holder_at(self, start: int) -> Holder | None:
        if self._query_fd < 0:
            self._query_fd = self._open(os.O_RDONLY)
        kind, length = _fcntl(
            self._query_fd, fcntl.F_OFD_GETLK, fcntl.F_WRLCK, start, 1 << _PID_BITS
        )
        if kind == fcntl.F_UNLCK:
            return None
        # The holder's range runs from the slot's first byte to one past its pid.
        return Holder(length - 1)

    def _open(self, flags: int) -> int:
        if flags & os.O_CREAT:
            self.directory.mkdir(parents=True, exist_ok=True)
        return os.open(self.path, flags | os.O_CLOEXEC, 0o644)

    def _unlock(self, start: int, length: int) -> None:
        self._held.discard(start)
        if self._fd >= 0:
            _fcntl(self._fd, fcntl.F_OFD_SETLK, fcntl.F_UNLCK, start, length)

    def close(self) -> None:
        """Close this instance's descriptors, which gives up every lease it holds."""
        fds, self._fd, self._query_fd = (self._fd, self._query_fd), -1, -1
        self._held.clear()
        for fd in fds:
            if fd >= 0:
                os.close(fd)

    def __del__(self) -> None:
        with contextlib.suppress(OSError):
            self.close()


def _slot(session_id: str) -> int:
    digest = hashlib.blake2b(session_id.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> (64 - _SLOT_BITS)


def _fcntl(fd: int, command: int, kind: int, start: int, length: int) -> tuple[int, int]:
    """One open-file-description lock call; the lock it reports (for ``F_OFD_GETLK``)."""
    answer = fcntl.fcntl(fd, command, _FLOCK.pack(kind, os.SEEK_SET, start, length, 0))
    reported, _whence, _start, reported_length, _pid = _FLOCK.unpack(answer)
    return reported, reported_length


_open: weakref.WeakSet[Leases] = weakref.WeakSet()


def _drop_inherited() -> None:
    # The child's copies share the parent's open file descriptions: closing them leaves the
    # parent's leases held, and keeps the child from holding them after the parent dies.
    for leases in list(_open):
        with contextlib.suppress(OSError):
            leases.close()


os.register_at_fork(after_in_child=_drop_inherited)

__all__ = [
    "LOCK_NAME",
    "Holder",
    "Lease",
    "LeaseUnavailableError",
    "Leases",
    "SessionLiveError",
]
