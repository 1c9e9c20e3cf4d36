"""Where a path really leads: ``os.path.realpath``, answered by the kernel where it can be.

``os.path.realpath`` walks the path in Python, one ``lstat`` per component (and a
``readlink`` per link): some 15 µs for a workspace five directories deep, paid several times
per model request and per tool call (the sandbox policy, the approval service, the project
instructions each resolve the workspace). The kernel resolves a path in one ``open``: an
``O_PATH`` descriptor (no read access needed, nothing opened for reading, a FIFO never waited
on) whose ``/proc/self/fd`` link names where it landed, every link followed and every ``..``
applied the way the kernel itself does, in three system calls. That is exactly what
``realpath`` computes for a path that exists, and a path whose last components are missing is
where its existing part leads with the rest appended, as ``realpath`` makes it; for anything
else (a loop, a path the kernel cannot name, no ``/proc``) the answer is ``realpath``'s own.

Nothing is cached: each call resolves the path as the filesystem stands, so a link swapped
between two calls is seen by the second.
"""

from __future__ import annotations

import os
from typing import Final

_DELETED: Final = " (deleted)"
"""How the kernel names a file or directory that was removed after it was opened."""


def real_path(path: str) -> str:
    """``os.path.realpath(path)`` (non-strict), for a ``str`` path."""
    try:
        handle = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return _missing(path)
    except (OSError, ValueError):  # a loop, too long, a NUL byte: realpath decides
        return os.path.realpath(path)
    try:
        found = os.readlink(f"/proc/self/fd/{handle}")
    except OSError:  # no /proc
        return os.path.realpath(path)
    finally:
        os.close(handle)
    # Removed after the open (or really named so), or outside this process's root: the
    # kernel's name is not a path; realpath says what it is now.
    if not found.startswith("/") or found.endswith(_DELETED):
        return os.path.realpath(path)
    return found


def _missing(path: str) -> str:
    """``realpath`` of a path that does not exist: its last component is missing (not a
    dangling link, which realpath would follow), so it is appended as written to where its
    parent leads, as realpath does; anything less plain is left to realpath."""
    parent, name = os.path.split(path)
    if not parent or name in ("", ".", "..") or os.path.lexists(path):
        return os.path.realpath(path)
    return os.path.join(real_path(parent), name)


__all__ = ["real_path"]
