"""The thread blocked in a notified system call, as its supervisor reaches it. Standard
library only.

Everything is opened through ``/proc/<tid>`` first and used only after
:func:`~._seccomp_filter.still_waiting` has confirmed the notification (the tid cannot have
been reused in between): the memory and a pidfd when the caller is opened, its root and
working directory when a path is first resolved, each followed by that check. Arguments are copied out of the caller's memory once and used from
the copy, so a thread that rewrites them after the check changes nothing.

Paths are resolved in the caller's view of the filesystem: its root (under bubblewrap, the
root of another mount namespace) and its working directory, with ``openat2``'s
``RESOLVE_IN_ROOT`` (an absolute symbolic link or ``..`` stays inside that root) and
``RESOLVE_NO_MAGICLINKS`` (``/proc/*/root``, ``/proc/*/fd/*`` and ``/dev/fd/*`` would lead
wherever the supervisor, not the caller, may go).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable

if __package__:
    from tether.sandbox import _syscalls as syscalls
else:  # loaded by the fork server or a launcher: this directory is on sys.path
    import _syscalls as syscalls  # type: ignore[import-not-found,no-redef,unused-ignore]

_RESOLVE = syscalls.RESOLVE_IN_ROOT | syscalls.RESOLVE_NO_MAGICLINKS
_RETRIES = 4
"""``openat2`` with ``RESOLVE_IN_ROOT`` fails with ``EAGAIN`` when a rename raced with a
``..``; it is tried this many times."""


class Caller:
    """The calling thread ``tid``: its memory, its descriptors, its root and working
    directory. ``waiting``: whether its notification is still pending (checked after
    everything opened through its tid, before the caller uses it). Close it (it holds
    descriptors)."""

    def __init__(self, arch: str, tid: int, waiting: Callable[[], bool]) -> None:
        self.arch = arch
        self.tid = tid
        self._waiting = waiting
        self._held: list[int] = []
        self._view: tuple[int, int] | None = None
        try:
            self.mem = self._hold(os.open(f"/proc/{tid}/mem", os.O_RDONLY | os.O_CLOEXEC))
            self.pidfd = self._hold(syscalls.pidfd_of_thread(tid))
            self.check()
        except BaseException:
            self.close()
            raise

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
        """``size`` bytes at ``address``; ``EFAULT`` when they are not all readable."""
        if size == 0:
            return b""
        try:
            data = os.pread(self.mem, size, address)
        except (OSError, OverflowError, ValueError) as err:
            raise OSError(errno.EFAULT, "bad address") from err
        if len(data) != size:
            raise OSError(errno.EFAULT, "bad address")
        return data

    def read_string(self, address: int, limit: int = 4096) -> bytes:
        """The NUL-terminated string at ``address`` (``ENAMETOOLONG`` past ``limit``)."""
        out = b""
        while len(out) < limit:
            try:
                chunk = self.read(address + len(out), 256)
            except OSError:
                chunk = self.read(address + len(out), 1)  # the string ends near a page end
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
        return self.view()[0]

    @property
    def cwd(self) -> int:
        return self.view()[1]

    def view(self) -> tuple[int, int]:
        """``O_PATH`` descriptors of the caller's root and working directory."""
        if self._view is None:
            root = self._hold(_open_dir(f"/proc/{self.tid}/root"))
            cwd = self._hold(_open_dir(f"/proc/{self.tid}/cwd"))
            self.check()
            self._view = root, cwd
        return self._view

    def resolve(self, path: bytes) -> int:
        """An ``O_PATH`` descriptor of what ``path`` names for the caller (the last component
        followed if it is a symbolic link, as ``connect`` does). Raises ``OSError``."""
        if not path:
            raise OSError(errno.ENOENT, "empty path")
        if not path.startswith(b"/"):
            path = self._cwd_in_root().rstrip(b"/") + b"/" + path
        return self._open_in_root(path, os.O_PATH | os.O_CLOEXEC)

    def _open_in_root(self, path: bytes, flags: int) -> int:
        for attempt in range(_RETRIES):
            try:
                return syscalls.openat2(self.arch, self.root, path, flags, _RESOLVE)
            except OSError as err:
                if err.errno != errno.EAGAIN or attempt == _RETRIES - 1:
                    raise
        raise AssertionError("unreachable")

    def _cwd_in_root(self) -> bytes:
        """The caller's working directory as a path inside its root, checked to lead back
        to the same directory (a directory renamed meanwhile, a working directory outside a
        ``chroot``, or a deleted one is refused rather than guessed)."""
        root = os.readlink(f"/proc/self/fd/{self.root}".encode())
        cwd = os.readlink(f"/proc/self/fd/{self.cwd}".encode())
        if root != b"/":
            if cwd != root and not cwd.startswith(root + b"/"):
                raise OSError(errno.EACCES, "working directory outside the root")
            cwd = cwd[len(root) :] or b"/"
        found = self._open_in_root(cwd, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            same = _identity(found) == _identity(self.cwd)
        finally:
            os.close(found)
        if not same:
            raise OSError(errno.EACCES, "working directory moved")
        return cwd


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


__all__ = ["Caller", "beneath"]
