"""Walking a directory tree for ``grep`` and ``glob``: by descriptors, never into hidden paths.

Each directory is opened relative to its parent's descriptor with ``O_NOFOLLOW``, so the path
the walk believes it is in is the path it is in: a directory swapped for a symbolic link to
``~/.ssh`` mid-walk is not entered. Entries that are hidden (:mod:`tether.sandbox._paths`, by
path or by identity) are skipped without a word, like ``.git``; symbolic links and special
files are not listed.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from tether.sandbox import PathRules
from tether.tools.fs._fence import PROTECTED_COMPONENT, hidden_error, opened_location, refuse_hidden

DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class Entry:
    rel: str
    """The path relative to the walk's root (``/``-separated)."""
    name: str
    real: str
    """The canonical absolute path."""
    is_dir: bool


@dataclass(frozen=True, slots=True)
class Root:
    """A directory opened to walk: its descriptor and canonical path (close ``fd``)."""

    fd: int
    real: str


def open_root(path: str, rules: PathRules, display: str, mode: str | None, verb: str) -> Root:
    """Open the directory ``path`` names (links followed, as a user naming it expects),
    refusing a hidden one; raises ``OSError`` as ``os.open`` does."""
    if rules.hides(os.path.realpath(path)):
        raise hidden_error(display, mode, verb)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        refuse_hidden(fd, rules, display, mode, verb)
        return Root(fd, opened_location(fd, display))
    except BaseException:
        os.close(fd)
        raise


def listing(
    fd: int,
    real: str,
    prefix: str,
    rules: PathRules,
    budget: list[int] | None = None,
    *,
    every_kind: bool = False,
) -> list[Entry]:
    """The directories and regular files (``every_kind``: and links, sockets, ...) in
    directory ``fd`` (canonical path ``real``), sorted as full paths sort, hidden entries and
    ``.git`` left out. ``budget[0]`` counts down the entries that may still be visited."""
    try:
        with os.scandir(fd) as it:
            items = list(it)
    except OSError:
        return []
    out: list[Entry] = []
    for item in items:
        if budget is not None:
            budget[0] -= 1
            if budget[0] < 0:
                break
        if item.name == PROTECTED_COMPONENT:
            continue
        try:
            st = item.stat(follow_symlinks=False)
        except OSError:
            continue
        path = os.path.join(real, item.name)
        plain = stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)
        if not (plain or every_kind) or rules.hides_entry(path, st):
            continue
        out.append(Entry(prefix + item.name, item.name, path, stat.S_ISDIR(st.st_mode)))
    # A directory sorts by its name plus "/" so that "a.txt" comes before "a/x".
    out.sort(key=lambda e: e.rel + "/" if e.is_dir else e.rel)
    return out


def tree(
    root: Root,
    rules: PathRules,
    budget: list[int] | None = None,
    depth: int | None = None,
    *,
    every_kind: bool = False,
) -> Iterator[tuple[Entry, int]]:
    """Every entry below ``root`` in path order (see :func:`listing`), with the descriptor
    of its directory (valid until the next entry). ``depth`` bounds how many components deep
    the walk goes; links are listed (``every_kind``) but never followed."""

    def listed(fd: int, real: str, prefix: str) -> Iterator[Entry]:
        return iter(listing(fd, real, prefix, rules, budget, every_kind=every_kind))

    stack: list[tuple[int, Iterator[Entry], int]] = [(root.fd, listed(root.fd, root.real, ""), 0)]
    try:
        while stack:
            fd, entries, level = stack[-1]
            entry = next(entries, None)
            if entry is None:
                stack.pop()
                if fd != root.fd:
                    os.close(fd)
                continue
            yield entry, fd
            if not entry.is_dir or (depth is not None and level + 1 >= depth):
                continue
            if budget is not None and budget[0] < 0:
                continue
            try:
                child = os.open(entry.name, DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue  # gone, or swapped for a link since it was listed
            if rules.hides_entry(entry.real, os.fstat(child)):
                os.close(child)
                continue
            stack.append((child, listed(child, entry.real, entry.rel + "/"), level + 1))
    finally:
        for fd, _, _ in stack:
            if fd != root.fd:
                os.close(fd)


def open_entry(entry: Entry, parent_fd: int, rules: PathRules) -> int | None:
    """Open the regular file ``entry`` for reading (not through a link, never a hidden one:
    checked by identity once open); ``None`` when it cannot be or must not be."""
    try:
        fd = os.open(
            entry.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent_fd
        )
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and not rules.hides_entry(entry.real, st):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


__all__ = ["DIR_FLAGS", "Entry", "Root", "listing", "open_entry", "open_root", "tree"]
