"""What the sandbox derives from the filesystem, reused while the paths it looked at stand.

The hidden and control paths, the readable roots of Landlock's read layer, the entries that
cover a writable workspace and the masks over hidden paths all come from listing directories
and looking paths up. Each is derived once and reused while every path consulted is as it was
(same device, inode, change and modification times and size, or still missing): an entry
added, removed, renamed or replaced in a directory changes that directory's times. The change
time (``st_ctime``) is what makes this safe against a command: ``touch`` can set a
directory's modification time back to what it was, nothing but the kernel sets its change
time (it moves to now at every change, ``utimensat`` included). A path changed within
:data:`FRESH_NS` of the derivation is not trusted: on a filesystem with coarse timestamps a
second change in the same tick would leave the times as they were.

Standard library only (imported by the launchers and the fork server too).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

FRESH_NS: Final = 2_000_000_000
"""A path changed this recently may change again within its timestamp's tick: what was
derived from it is not reused until it has been quiet this long."""

Stamp = tuple[str, tuple[int, int, int, int, int] | None]
"""A path and its (device, inode, ctime in ns, mtime in ns, size), or ``None`` while it is
missing."""


def stamp(path: str) -> Stamp:
    """``path`` as it stands now (followed through links, as a lookup below it would be)."""
    try:
        info = os.stat(path)
    except OSError:
        return path, None
    return path, (info.st_dev, info.st_ino, info.st_ctime_ns, info.st_mtime_ns, info.st_size)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The paths a derivation consulted, as they stood, and when it started."""

    stamps: tuple[Stamp, ...]
    built: int
    """When the derivation started (``time.time_ns``, taken before the first look)."""

    def unchanged(self) -> bool:
        """Every path stands as recorded, and none had changed shortly before the derivation
        (:data:`FRESH_NS`), so what was derived from them still holds."""
        for path, recorded in self.stamps:
            if stamp(path)[1] != recorded:
                return False
            if recorded is not None and recorded[2] > self.built - FRESH_NS:  # its ctime
                return False
        return True


def started() -> int:
    """The ``built`` time of a derivation about to start: take it before the first look."""
    return time.time_ns()


def snapshot(paths: Iterable[str], built: int) -> Snapshot:
    """A :class:`Snapshot` of ``paths`` (each once), for a derivation that started at
    ``built``: take it after the derivation, so a change during it counts as fresh."""
    return Snapshot(tuple(stamp(p) for p in dict.fromkeys(paths)), built)


__all__ = ["FRESH_NS", "Snapshot", "Stamp", "snapshot", "stamp", "started"]
