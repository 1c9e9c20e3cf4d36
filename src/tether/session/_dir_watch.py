"""Names that appear or change in one directory, from the kernel (Linux ``inotify``).

The answer box's waiters use it to notice a file planted in the box when it is planted,
instead of listing the box on a timer. Python's standard library has no binding, so the calls
are made through ``ctypes``. Where inotify is missing or exhausted (another system, a full
``max_user_instances``), :meth:`DirWatch.open` returns ``None`` and the caller falls back to
looking on a timer.

Closing an inotify instance waits for the kernel to retire its marks (an RCU grace period:
10-20 ms measured here), which would delay every answered approval by that much. So a watch
that ends only removes its mark (microseconds) and leaves its instance in a small pool of this
process for the next watch; the pool's instances close with the process.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import struct
import threading
from pathlib import Path
from typing import Final

from tether._readable import readable

IN_MODIFY: Final = 0x002
IN_ATTRIB: Final = 0x004
IN_CLOSE_WRITE: Final = 0x008
IN_MOVED_TO: Final = 0x080
IN_CREATE: Final = 0x100
IN_DELETE_SELF: Final = 0x400
IN_MOVE_SELF: Final = 0x800
IN_Q_OVERFLOW: Final = 0x4000
IN_IGNORED: Final = 0x8000
IN_ONLYDIR: Final = 0x01000000
IN_DONT_FOLLOW: Final = 0x02000000
IN_NONBLOCK: Final = os.O_NONBLOCK
IN_CLOEXEC: Final = os.O_CLOEXEC

CHANGES: Final = IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE | IN_MODIFY | IN_ATTRIB
"""A name created, renamed in, written, or with its attributes (so its change time) changed."""
LOST: Final = IN_Q_OVERFLOW | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF
"""Events may have been missed, or the directory is gone: look at everything again."""
EVENT: Final = struct.Struct("iIII")
READ_SIZE: Final = 64 * 1024
POOLED: Final = 8
"""Idle inotify instances a process keeps for its next watches (more are closed)."""

_idle: list[int] = []
"""Instances whose watch ended, for the next :meth:`DirWatch.open`."""
_idle_lock = threading.Lock()


class DirWatch:
    """One inotify watch on one directory, read without blocking on the running loop."""

    def __init__(self, libc: ctypes.CDLL, fd: int, wd: int) -> None:
        self._libc = libc
        self._fd = fd
        self._wd = wd
        self.lost = False
        """The watch stopped (the directory went away): callers should look by themselves."""

    @classmethod
    def open(cls, directory: Path) -> DirWatch | None:
        """A watch on ``directory``'s entries, or ``None`` where inotify cannot give one."""
        libc = _inotify_calls()
        if libc is None:
            return None
        with _idle_lock:
            fd = _idle.pop() if _idle else libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            return None
        flags = CHANGES | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW
        wd = libc.inotify_add_watch(fd, os.fsencode(directory), flags)
        if wd < 0:
            _put_back(fd)
            return None
        return cls(libc, fd, wd)

    def fileno(self) -> int:
        """The inotify instance's descriptor (``-1`` once closed)."""
        return self._fd

    def close(self) -> None:
        """End the watch; its instance goes back to the pool (see the module's docstring)."""
        if self._fd < 0:
            return
        if not self.lost:
            self._libc.inotify_rm_watch(self._fd, self._wd)
        _put_back(self._fd)
        self._fd = -1

    async def changed(self) -> list[str] | None:
        """The names that changed since the last call, once there is at least one; ``None``
        when events were lost or the directory went away (look at every entry again)."""
        while True:
            batch = self.read_now()
            if batch is None or batch:
                return batch
            await readable(self._fd)

    def read_now(self) -> list[str] | None:
        """The names changed since the last read, without waiting (``[]``: none yet)."""
        try:
            data = os.read(self._fd, READ_SIZE)
        except BlockingIOError:
            return []
        except OSError as err:
            if err.errno == errno.EINTR:
                return []
            self.lost = True
            return None
        names: list[str] = []
        lost = False
        offset = 0
        while offset + EVENT.size <= len(data):
            wd, mask, _cookie, size = EVENT.unpack_from(data, offset)
            offset += EVENT.size
            raw = data[offset : offset + size].rstrip(b"\0")
            offset += size
            if wd != self._wd and not mask & IN_Q_OVERFLOW:
                continue  # a watch this pooled instance held before
            if mask & LOST:
                lost = True
                self.lost = self.lost or bool(mask & ~IN_Q_OVERFLOW)
            elif raw:
                names.append(os.fsdecode(raw))
        return None if lost else names


@functools.cache
def _inotify_calls() -> ctypes.CDLL | None:
    """The C library, when it has the inotify calls."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        for name in ("inotify_init1", "inotify_add_watch", "inotify_rm_watch"):
            getattr(libc, name)
    except (OSError, AttributeError):
        return None
    return libc


def _put_back(fd: int) -> None:
    """Keep an instance for the next watch, or close it when the pool is full."""
    with _idle_lock:
        if len(_idle) < POOLED:
            _idle.append(fd)
            return
    os.close(fd)


__all__ = ["DirWatch"]
