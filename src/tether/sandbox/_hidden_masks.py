"""bubblewrap's mounts over the hidden paths that exist.

A hidden path is masked only where it exists when the command starts (a missing one has no
mount point): a directory by an empty read-only tmpfs, anything else by ``/dev/null``. Which exist is looked
up once per set of hidden paths, and again whenever a directory holding one of them has
changed (:mod:`._listings`): a hidden path created after one command is masked for the next.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Final

from tether.sandbox import _listings as listings
from tether.sandbox._paths import below


@dataclass(frozen=True, slots=True)
class _Masks:
    argv: tuple[str, ...]
    snapshot: listings.Snapshot


_CACHE_SIZE: Final = 4
"""Sets of hidden paths whose masks are kept (a harness has one, usually)."""
_cache: dict[tuple[str, ...], _Masks] = {}


def hidden_masks(hidden: tuple[str, ...]) -> tuple[str, ...]:
    """The bwrap options that mask every existing path of ``hidden`` (canonical). Put them
    after the workspace's binds, so that no bind re-exposes a hidden path below it."""
    cached = _cache.pop(hidden, None)
    if cached is None or not cached.snapshot.unchanged():
        built = listings.started()
        argv = _masks(hidden)
        # Creating, removing or replacing a path changes its directory (or, for a directory
        # missing too, makes that appear).
        parents = (os.path.dirname(p) for p in hidden)
        cached = _Masks(argv, listings.snapshot(parents, built))
    _cache[hidden] = cached  # most recently used last
    while len(_cache) > _CACHE_SIZE:
        _cache.pop(next(iter(_cache)))
    return cached.argv


def _masks(hidden: tuple[str, ...]) -> tuple[str, ...]:
    out: list[str] = []
    masked: list[str] = []
    for path in hidden:
        directory = os.path.isdir(path)
        # A path below one masked already is covered by that mask (and has no mount point).
        if not (directory or os.path.lexists(path)) or any(below(path, t) for t in masked):
            continue
        masked.append(path)
        if directory:
            out += ["--tmpfs", path, "--remount-ro", path]
        else:
            out += ["--ro-bind", "/dev/null", path]
    return tuple(out)


__all__ = ["hidden_masks"]
