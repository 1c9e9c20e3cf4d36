"""The thread blocked in a notified system call, as its supervisor reaches it. Standard
library only.

Everything is read or opened through the tid first and used only after
:func:`~._seccomp_filter.still_waiting` has confirmed the notification (the tid cannot have
been reused in between): its memory (``process_vm_readv``), a pidfd when a descriptor is
first taken, its root and working directory when a path is first resolved, a descriptor it
names as a directory (``dirfd``), each opening followed by that check. Arguments are copied
out of the caller's memory once and used from the copy, so a thread that rewrites them after
the check changes nothing.

Paths are resolved in the caller's view of the filesystem: its root (under bubblewrap, the
root of another mount namespace) and its working directory, with ``openat2``'s
``RESOLVE_IN_ROOT`` (an absolute symbolic link or ``..`` stays inside that root) and
``RESOLVE_NO_MAGICLINKS`` (``/proc/*/root``, ``/proc/*/fd/*`` and ``/dev/fd/*`` would lead
wherever the supervisor, not the caller, may go); a relative path that stays beneath where
it starts is resolved from there (``RESOLVE_BENEATH``), which finds the same file for less.
"""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Callable

if __package__:
    from tether.sandbox import _syscalls as syscalls
else:  # loaded by the fork server or a launcher: this directory is on sys.path
    import _syscalls as syscalls  # type: ignore[import-not-found,no-redef,unused-ignore]

AT_FDCWD = -100
_RESOLVE = syscalls.RESOLVE_IN_ROOT | syscalls.RESOLVE_NO_MAGICLINKS
_BENEATH = syscalls.RESOLVE_BENEATH | syscalls.RESOLVE_NO_MAGICLINKS
_DIRECTORY = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
_RETRIES = 4
"""``openat2`` with ``RESOLVE_IN_ROOT`` fails with ``EAGAIN`` when a rename raced with a
``..``; it is tried this many times."""


class Caller:
    """The calling thread ``tid``: its memory, its descriptors, its root and working
    directory. ``waiting``: whether its notification is still pending (checked after
    everything opened through its tid; :meth:`check` it before acting on what was only
    read). Close it (it holds descriptors)."""

    def __init__(self, arch: str, tid: int, waiting: Callable[[], bool]) -> None:
        self.arch = arch
        self.tid = tid
        self._waiting = waiting
        self._held: list[int] = []
        self._pidfd: int | None = None
        self._root: int | None = None
        self._cwd: int | None = None

    @property
    def pidfd(self) -> int:
        """A pidfd of the caller (opened when first needed: most calls take no descriptor)."""
        if self._pidfd is None:
            self._pidfd = self._hold(syscalls.pidfd_of_thread(self.tid))
            self.check()
        return self._pidfd

    def check(self) -> None:
        """``ESRCH`` unless the caller is still waiting."""
        if not self._waiting():
            raise OSError(errno.ESRCH, "the caller is gone")

    def _hold(self, fd: int) -> int:
        self._held.append(fd)
        return fd

    def close(self) -> None:
        while self._held:
            os.close(self._held.pop())

    # -- memory ---------------------------------------------------------------------------
    def read(self, address: int, size: int) -> bytes:
        """``size`` bytes at ``address``; ``EFAULT`` when they are not all readable. (Read
        through the tid: :meth:`check` before acting on them.)"""
        if size == 0:
            return b""
        data = self._read(address, size)
        if len(data) != size:
            raise OSError(errno.EFAULT, "bad address")
        return data

    def _read(self, address: int, size: int) -> bytes:
        """What is readable of ``size`` bytes at ``address``: ``EFAULT`` when nothing is,
        ``EACCES`` when the caller cannot be read at all (it made itself undumpable),
        ``ESRCH`` when it is gone."""
        try:
            data = syscalls.read_memory(self.tid, address, size)
        except OSError as err:
            if err.errno in (errno.EPERM, errno.EACCES):
                raise OSError(errno.EACCES, "the caller's memory cannot be read") from err
            if err.errno == errno.ESRCH:
                raise
            raise OSError(errno.EFAULT, "bad address") from err
        except (OverflowError, ctypes.ArgumentError) as err:
            raise OSError(errno.EFAULT, "bad address") from err
        if not data:
            raise OSError(errno.EFAULT, "bad address")
        return data

    def read_string(self, address: int, limit: int = 4096) -> bytes:
        """The NUL-terminated string at ``address`` (``ENAMETOOLONG`` past ``limit``)."""
        out = b""
        while len(out) < limit:
            chunk = self._read(address + len(out), 256)
            end = chunk.find(b"\0")
            if end >= 0:
                return out + chunk[:end]
            out += chunk
        raise OSError(errno.ENAMETOOLONG, "path too long")

    def write(self, address: int, data: bytes) -> None:
        """Only while the notification is pending: the tid is the caller's until answered."""
        syscalls.write_memory(self.tid, address, data)

    # -- descriptors and signals ---------------------------------------------------------------
    def take_fd(self, fd: int) -> int:
        """A duplicate of the caller's descriptor ``fd`` (the same open file description)."""
        if not 0 <= fd < 1 << 31:
            raise OSError(errno.EBADF, "bad file descriptor")
        return syscalls.pidfd_getfd(self.arch, self.pidfd, fd)

    def signal(self, signo: int) -> None:
        syscalls.signal_thread(self.pidfd, signo)

    # -- the caller's view of the filesystem ------------------------------------------------------
    @property
    def root(self) -> int:
        """An ``O_PATH`` descriptor of the caller's root directory."""
        if self._root is None:
            self._root = self._hold(_open_dir(f"/proc/{self.tid}/root"))
            self.check()
        return self._root

    @property
    def cwd(self) -> int:
        """An ``O_PATH`` descriptor of the caller's working directory."""
        if self._cwd is None:
            self._cwd = self._hold(_open_dir(f"/proc/{self.tid}/cwd"))
            self.check()
        return self._cwd

    def resolve(self, path: bytes) -> int:
        """An ``O_PATH`` descriptor of what ``path`` names for the caller (the last component
        followed if it is a symbolic link, as ``connect`` does). Raises ``OSError``."""
        return self.lookup(self.base(AT_FDCWD), path, os.O_PATH | os.O_CLOEXEC)

    def base(self, dirfd: int) -> int:
        """An ``O_PATH`` descriptor (held) of where the caller's relative paths start for
        ``dirfd``: its working directory for ``AT_FDCWD``, else the directory (or file) its
        descriptor ``dirfd`` is."""
        if dirfd == AT_FDCWD:
            return self.cwd
        if not 0 <= dirfd < 1 << 31:
            raise OSError(errno.EBADF, "bad file descriptor")
        fd = self._hold(os.open(f"/proc/{self.tid}/fd/{dirfd}", os.O_PATH | os.O_CLOEXEC))
        self.check()
        return fd

    def lookup(self, base: int, path: bytes, flags: int) -> int:
        """A descriptor (``flags``: ``O_PATH`` and maybe ``O_DIRECTORY``, ``O_NOFOLLOW``) of
        what ``path`` names for the caller, relative to ``base`` (a descriptor of ours, from
        :meth:`base`) when it is relative. Not held: the caller of this method closes it.

        A relative path is resolved beneath ``base`` first (``RESOLVE_BENEATH``: what it
        finds there is what the kernel would find, since nothing led out of ``base``); one
        that leads out (``..`` above it, an absolute symbolic link) is resolved again as a
        path inside the caller's root."""
        if not path:
            raise OSError(errno.ENOENT, "empty path")
        if not path.startswith(b"/"):
            try:
                return self._open(base, path, flags, _BENEATH)
            except OSError as err:
                if err.errno != errno.EXDEV:
                    raise
            path = self.in_root(base).rstrip(b"/") + b"/" + path
        return self._open(self.root, path, flags, _RESOLVE)

    def split(self, base: int, path: bytes) -> tuple[int, bytes]:
        """The directory that holds the last component of ``path`` (a descriptor, not held)
        and that component, with any trailing slashes (``mkdir("a/b/")`` makes ``b``). The
        component is ``b""`` for ``/``, and may be ``.`` or ``..``: then there is nothing
        to create."""
        if not path:
            raise OSError(errno.ENOENT, "empty path")
        stripped = path.rstrip(b"/")
        head, _, name = stripped.rpartition(b"/")
        name += path[len(stripped) :]
        if not stripped:
            return self.lookup(base, b"/", _DIRECTORY), b""
        if b"/" not in stripped:
            return os.dup(base), name
        return self.lookup(base, head or b"/", _DIRECTORY), name

    def _open(self, at: int, path: bytes, flags: int, resolve: int) -> int:
        for attempt in range(_RETRIES):
            try:
                return syscalls.openat2(self.arch, at, path, flags, resolve)
            except OSError as err:
                if err.errno != errno.EAGAIN or attempt == _RETRIES - 1:
                    raise
        raise AssertionError("unreachable")

    def in_view(self, where: str | bytes) -> bytes:
        """``where``, the real path of something found through the caller (``readlink`` of
        a descriptor of ours), as a path inside the caller's root."""
        found = os.fsencode(where)
        root = os.readlink(f"/proc/self/fd/{self.root}".encode())
        if root == b"/":
            return found
        if found != root and not found.startswith(root + b"/"):
            raise OSError(errno.EACCES, "outside the caller's root")
        return found[len(root) :] or b"/"

    def in_root(self, fd: int) -> bytes:
        """Where directory ``fd`` is, as a path inside the caller's root, checked to lead back
        to the same directory (one renamed meanwhile, outside a ``chroot``, or deleted is
        refused rather than guessed)."""
        where = self.in_view(os.readlink(f"/proc/self/fd/{fd}".encode()))
        found = self._open(self.root, where, _DIRECTORY, _RESOLVE)
        try:
            same = _identity(found) == _identity(fd)
        finally:
            os.close(found)
        if not same:
            raise OSError(errno.EACCES, "directory moved")
        return where


def beneath(where: str, roots: tuple[str, ...]) -> bool:
    """Whether ``where``, the real path of a file found through the caller (``readlink`` of
    ``/proc/self/fd/N``), is one of ``roots`` or below one. A path that is not absolute (the
    file is in no mount of ours) or of a deleted file is below none."""
    if not where.startswith("/") or where.endswith(" (deleted)"):
        return False
    return any(where == root or where.startswith(root.rstrip("/") + "/") for root in roots)


def _open_dir(path: str) -> int:
    return os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)


def _identity(fd: int) -> tuple[int, int]:
    info = os.fstat(fd)
    return info.st_dev, info.st_ino


__all__ = ["AT_FDCWD", "Caller", "beneath"]
