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

import contextlib
import errno
import os
import stat
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

FRESH_NS: Final = 2_000_000_000
"""A path changed this recently may change again within its timestamp's tick: what was
derived from it is not reused until it has been quiet this long."""

Stamp = tuple[str, tuple[int, int, int, int, int] | None]
"""A path and its (device, inode, ctime in ns, mtime in ns, size), or ``None`` while it is
missing."""


_moment = threading.local()


@contextlib.contextmanager
def one_moment() -> Iterator[None]:
    """Inside, each path is stamped once (:func:`stamp`): the checks of one command's
    confinement see the filesystem as it stands at one moment, and a directory several
    derivations consulted (``$HOME``, the workspace) costs one ``stat``, not one each. Safe:
    a stamp reused is never newer than what a derivation then saw, so at worst a change is
    noticed once more than needed."""
    if getattr(_moment, "stamps", None) is not None:
        yield  # nested: the outer moment's
        return
    _moment.stamps = {}
    try:
        yield
    finally:
        _moment.stamps = None


def stamp(path: str) -> Stamp:
    """``path`` as it stands now (followed through links, as a lookup below it would be)."""
    memo: dict[str, Stamp] | None = getattr(_moment, "stamps", None)
    if memo is not None and path in memo:
        return memo[path]
    try:
        info = os.stat(path)
    except OSError:
        found: Stamp = (path, None)
    else:
        found = path, (info.st_dev, info.st_ino, info.st_ctime_ns, info.st_mtime_ns, info.st_size)
    if memo is not None:
        memo[path] = found
    return found


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The paths a derivation consulted, as they stood, and when it started."""

    stamps: tuple[Stamp, ...]
    built: int
    """When the derivation started (``time.time_ns``, taken before the first look)."""
    lookups: dict[str, tuple[Found, ...]] | None = None
    """For a directory consulted only to look names up in it (never listed): the entries
    looked up there and what was found. When such a directory changed (a busy ``/tmp``, a
    home directory, a directory of projects), the derivation still holds if those entries
    are as found: nothing relevant changed."""

    def unchanged(self) -> bool:
        """Every path stands as recorded, and none had changed shortly before the derivation
        (:data:`FRESH_NS`), so what was derived from them still holds; or, for a directory
        only looked into, the entries looked up there are as found."""
        for path, recorded in self.stamps:
            now = stamp(path)[1]
            fresh = recorded is not None and recorded[2] > self.built - FRESH_NS  # its ctime
            if now == recorded and not fresh:
                continue
            looked = None if self.lookups is None else self.lookups.get(path)
            if looked is None or now is None or recorded is None or now[:2] != recorded[:2]:
                return False  # listed, or the directory itself is gone or replaced
            if not all(identity(entry) == found for entry, found in looked):
                return False
        return True


Found = tuple[str, "tuple[int, int] | str | None"]
"""An entry looked up, and what was there (:func:`identity`)."""


def identity(path: str) -> tuple[int, int] | str | None:
    """What is at ``path`` itself, links not followed: ``None`` when nothing, the target of
    a symbolic link, else its (device, inode). Times are not compared: an entry replaced has
    another inode (or, reused, the same file identity the derivation recorded for it)."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return os.readlink(path)
    return info.st_dev, info.st_ino


taken = 0
"""Snapshots taken: derivations made, or made again (what tests count)."""


def started() -> int:
    """The ``built`` time of a derivation about to start: take it before the first look."""
    return time.time_ns()


def snapshot(
    paths: Iterable[str], built: int, lookups: dict[str, tuple[Found, ...]] | None = None
) -> Snapshot:
    """A :class:`Snapshot` of ``paths`` (each once), for a derivation that started at
    ``built``: take it after the derivation, so a change during it counts as fresh."""
    global taken
    taken += 1
    return Snapshot(tuple(stamp(p) for p in dict.fromkeys(paths)), built, lookups)


_MAX_LINKS: Final = 40
"""Symbolic links followed in one resolution before it fails as the kernel does (``ELOOP``)."""


LookedUp = tuple[str, str | None]
"""An entry a resolution looked up, and what it found: ``None`` (missing), ``""`` (there, no
symbolic link) or the target of the link it is."""


def resolved(path: str) -> tuple[str, list[LookedUp]]:
    """``os.path.realpath`` of the absolute ``path`` (a missing tail stays as written), and
    every entry looked up on the way, those of the links followed included: the result
    stands while each is as found (:func:`found_again`)."""
    looked: list[LookedUp] = []
    pending = path.split("/")[::-1]
    current = "/"
    links = 0
    while pending:
        name = pending.pop()
        if name in ("", "."):
            continue
        if name == "..":
            current = os.path.dirname(current)
            continue
        candidate = os.path.join(current, name)
        target = _looked_up(candidate)
        looked.append((candidate, target))
        if target is None:
            return os.path.normpath(os.path.join(candidate, *pending[::-1])), looked
        if target:
            links += 1
            if links > _MAX_LINKS:
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
            if target.startswith("/"):
                current = "/"
            pending += target.split("/")[::-1]
            continue
        current = candidate
    return current, looked


def _looked_up(path: str) -> str | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return os.readlink(path) if stat.S_ISLNK(info.st_mode) else ""


def found_again(looked: Iterable[LookedUp]) -> bool:
    """Each entry of a resolution is as it was found: missing still, no link still, or the
    same link. Compares what a resolution depends on, never times: a busy directory on the
    way (``/tmp``, a directory of projects) does not make it look again."""
    return all(_looked_up(path) == found for path, found in looked)


_REAL_CACHE: Final = 32
"""Paths whose real path is kept (a harness asks for a handful: its workspace, its runners)."""
_real: dict[str, tuple[str, tuple[LookedUp, ...]]] = {}
resolutions = 0
"""Resolutions :func:`real_path` made (not kept ones): what tests count."""


def real_path(path: str) -> str:
    """:func:`resolved`'s real path of ``path``, kept while the entries it came through are
    as they were (every command asks for its workspace's and its runners')."""
    global resolutions
    if not os.path.isabs(path):
        return os.path.realpath(path)  # (relative to a working directory that may change)
    cached = _real.get(path)
    if cached is not None and found_again(cached[1]):
        return cached[0]
    resolutions += 1
    real, looked = resolved(path)
    _real[path] = (real, tuple(looked))
    while len(_real) > _REAL_CACHE:
        _real.pop(next(iter(_real)), None)
    return real


__all__ = [
    "FRESH_NS",
    "Found",
    "LookedUp",
    "Snapshot",
    "Stamp",
    "found_again",
    "identity",
    "one_moment",
    "real_path",
    "resolved",
    "snapshot",
    "stamp",
    "started",
]
