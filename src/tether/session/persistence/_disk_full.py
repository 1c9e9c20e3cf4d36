"""A full disk under a session store, said with the numbers a user needs: the free space where
the store lives and about how much the failed write needed."""

from __future__ import annotations

import errno
import os
import sqlite3
from typing import Final

FULL_CODES: Final = frozenset({sqlite3.SQLITE_FULL})


def is_disk_full(err: BaseException) -> bool:
    if isinstance(err, OSError):
        return err.errno in (errno.ENOSPC, errno.EDQUOT)
    return isinstance(err, sqlite3.Error) and (
        getattr(err, "sqlite_errorcode", None) in FULL_CODES or "disk is full" in str(err)
    )


def disk_full_message(where: str, path: str, need: int) -> str:
    """``where: the disk is full …`` with the free space there and what the write needed."""
    directory = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    try:
        stat = os.statvfs(directory)
        free = _size(stat.f_bavail * stat.f_frsize)
    except OSError:
        free = "unknown"
    return (
        f"{where}: the disk is full ({free} free in {directory}); this write needs about "
        f"{_size(need)}. Free some space, then run again: the events stored so far are "
        "kept"
    )


def _size(count: int) -> str:
    value = float(count)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} {unit}" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


__all__ = ["disk_full_message", "is_disk_full"]
