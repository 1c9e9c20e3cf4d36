"""The names other tools act on outside any sandbox, and the rule that keeps them out of every
agent's reach at any depth. Standard library only: the supervisor of a confined command (in
the fork server and the launchers) applies the rule too, with nothing else importable.

Two rules, for commands (:mod:`._creation_calls`) and for the file tools' fence alike:

- **Control names.** :data:`CONTROL_NAMES` are what tether, Claude Code, Codex, MCP clients,
  git or a git hook manager read and act on, unconfined, in the directory they are started
  in (or a repository's top). At the workspace root the backends keep them read-only
  whether they exist or not (:mod:`._paths`). At any depth, and in every directory a command
  may write, an entry whose name is one of them (:data:`DEPTH_NAMES`, compared
  case-insensitively) cannot be created, and nothing inside an existing one can be created
  or changed: ``sub/.git`` planted by an agent would be the repository of a ``git status`` run
  in ``sub``, hooks and ``core.fsmonitor`` included; ``sub/.claude/settings.json`` the
  settings, hooks included, of Claude Code started there.
- **Git directories by their content.** git takes any directory holding ``HEAD`` and
  ``objects`` and ``refs`` (or ``HEAD`` and ``commondir``) for a repository's git directory
  (a bare repository), whatever its name, and runs what its ``config`` names (the pager,
  ``core.fsmonitor`` with a ``core.worktree``) when started inside it. So ``HEAD`` cannot be
  created beside ``objects`` and ``refs`` or ``commondir``, nor those beside ``HEAD``
  (:func:`completes_git_dir`), and nothing inside an existing one can be created or changed
  (:func:`is_git_dir`).

Removing or renaming away stays allowed: what is gone runs nothing, and a renamed control
directory can never take its name back. "Changed" means written through an ``open`` for
writing, created, linked or renamed into: below the workspace root, under bubblewrap, an
existing file's mode, times or length (``chmod``, ``utimensat``, ``truncate``) are not
intercepted, so an existing, not executable hook in a nested repository can be made
executable (docs/sandbox.md, "Control names at any depth").
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Final

CONFIG_NAME: Final = "tether.toml"
"""tether's workspace configuration file (``tether.kernel._config.CONFIG_FILE``; a test keeps
them equal: this module cannot import the kernel)."""

_LEFTHOOK: Final = tuple(
    f"{where}{stem}.{ext}"
    for where in ("", ".config/")
    for stem in ("lefthook", ".lefthook", "lefthook-local", ".lefthook-local")
    for ext in ("yml", "yaml", "toml", "json", "jsonc")
    if not (where and stem.startswith("."))
)
"""lefthook's configuration files, every name it looks for (its main and ``-local`` files,
at the root and in ``.config/``)."""

CONTROL_NAMES: Final = (
    CONFIG_NAME,
    ".claude",
    ".codex",  # Codex's hooks.json and config.toml: Codex runs their hooks unconfined
    ".mcp.json",
    ".git",
    # Hook managers: git runs what they name at the next commit, outside any sandbox.
    ".husky",
    ".pre-commit-config.yaml",
    *_LEFTHOOK,
    ".lefthook",
    ".lefthook-local",
)
"""Paths relative to the workspace root that tether, Claude Code, Codex, MCP clients, git or a
git hook manager act on later, outside any sandbox: readable by agents, never writable."""

FOLDED_NAMES: Final = tuple(n.casefold() for n in CONTROL_NAMES)
""":data:`CONTROL_NAMES` case-folded: on a case-insensitive filesystem ``.GIT`` is ``.git``."""

DEPTH_NAMES: Final = frozenset(n.rsplit("/", 1)[-1] for n in FOLDED_NAMES)
"""The last component of each control name, case-folded: an entry named so is a control path
at any depth (``sub/.git``, ``sub/.config/lefthook.yml`` and ``sub/lefthook.yml`` alike)."""

GIT_HEAD: Final = "HEAD"
GIT_PARTS: Final = ("objects", "refs")
GIT_COMMON: Final = "commondir"
_GIT_SIGNS: Final = frozenset(n.casefold() for n in (GIT_HEAD, *GIT_PARTS, GIT_COMMON))


def name_text(name: str | bytes) -> str:
    """A name as compared: bytes decoded as the OS does (undecodable bytes kept apart)."""
    return os.fsdecode(name) if isinstance(name, bytes) else name


_DEPTH_BYTES: Final = frozenset(n.encode() for n in DEPTH_NAMES)


def is_control_name(name: str | bytes) -> bool:
    """Whether an entry named ``name`` is a control path wherever it is. (Every control name
    is ASCII, so an ASCII name compares as it is, lower-cased; any other is case-folded
    whole: on a case-folding filesystem ``.huſky`` is ``.husky``.)"""
    if isinstance(name, bytes) and name.isascii():
        return name.lower() in _DEPTH_BYTES
    return name_text(name).casefold() in DEPTH_NAMES


def control_component(parts: Iterable[str | bytes]) -> str | None:
    """The first of ``parts`` (a path's components below a writable root) that is a control
    name, as written; ``None`` when there is none."""
    return next((name_text(p) for p in parts if is_control_name(p)), None)


def is_git_dir(exists: Callable[[str], bool]) -> bool:
    """Whether a directory whose entries ``exists`` tells is one git takes for a git
    directory (git looks for these exact names)."""
    if not exists(GIT_HEAD):
        return False
    return exists(GIT_COMMON) or all(exists(p) for p in GIT_PARTS)


def completes_git_dir(name: str | bytes, exists: Callable[[str], bool]) -> bool:
    """Whether creating ``name`` in a directory whose entries ``exists`` tells would make it
    one git takes for a git directory. Compared case-insensitively (refusing ``head`` beside
    ``objects`` and ``refs`` costs nothing, and on a case-insensitive filesystem it is
    ``HEAD``)."""
    folded = name_text(name).casefold()
    if folded not in _GIT_SIGNS:
        return False
    if folded == GIT_HEAD.casefold():
        return exists(GIT_COMMON) or all(exists(p) for p in GIT_PARTS)
    if not exists(GIT_HEAD):
        return False
    if folded == GIT_COMMON:
        return True
    return all(exists(p) for p in GIT_PARTS if p != folded)


def git_dir_on_path(path: str, root: str) -> str | None:
    """The first directory from ``root`` down to ``path``'s own (both canonical, ``path``
    below ``root``) that git takes for a git directory, as it stands; ``None`` if none."""
    below = os.path.relpath(os.path.dirname(path), root)
    parts = [] if below == os.curdir else below.split(os.sep)
    for depth in range(len(parts) + 1):
        where = os.path.join(root, *parts[:depth])
        if is_git_dir(_lexists_in(where)):
            return where
    return None


def git_dir_made_by(path: str, root: str) -> str | None:
    """The directory that writing ``path`` (canonical, below canonical ``root``) would make a
    git directory, as the filesystem stands: the one where it creates its first missing
    component (below that every directory is new); ``None`` if none."""
    parts = os.path.relpath(path, root).split(os.sep)
    for depth, part in enumerate(parts):
        here = os.path.join(root, *parts[:depth])
        if os.path.lexists(os.path.join(here, part)):
            continue
        return here if completes_git_dir(part, _lexists_in(here)) else None
    return None


def _lexists_in(directory: str) -> Callable[[str], bool]:
    return lambda name: os.path.lexists(os.path.join(directory, name))


def made_git_dir(name: str | bytes, directory: int) -> bool:
    """Whether ``name``, just made in ``directory`` (a descriptor), made it a git directory
    after all (another process made the rest meanwhile): the maker takes it out again. Each
    of two racing makers checks after making its own entry, so at least one sees the
    other's."""
    return name_text(name).casefold() in _GIT_SIGNS and is_git_dir(entries_at(directory))


def entries_at(directory: int) -> Callable[[str], bool]:
    """Whether an entry of that name is in ``directory`` (a descriptor; links not followed)."""

    def exists(name: str) -> bool:
        try:
            os.stat(name, dir_fd=directory, follow_symlinks=False)
        except OSError:
            return False
        return True

    return exists


DENIAL_NOTE: Final = (
    "[sandbox: commands cannot create entries named like control files (.git, .claude, "
    ".codex, .mcp.json, tether.toml, a git hook manager's) at any depth, nor change anything "
    "inside one or inside a git directory: git, Claude Code or Codex started there would act "
    "on them outside the sandbox. git init and git clone need danger-full-access]"
)
"""Appended to a denied command's result under workspace-write (see
:func:`tether.sandbox._backends.denial_note`)."""


__all__ = [
    "CONFIG_NAME",
    "CONTROL_NAMES",
    "DENIAL_NOTE",
    "DEPTH_NAMES",
    "FOLDED_NAMES",
    "GIT_COMMON",
    "GIT_HEAD",
    "GIT_PARTS",
    "completes_git_dir",
    "control_component",
    "entries_at",
    "git_dir_made_by",
    "git_dir_on_path",
    "is_control_name",
    "is_git_dir",
    "made_git_dir",
    "name_text",
]
