"""Configuration files read from a workspace: read once, checked, then served from memory.

A workspace is writable by the agents that work in it, so a file there that configures tether
(``tether.toml``, the ``.claude/settings.json`` it lists for the ``hooks`` plugin, and whatever
later features read) is the agents' to change. This module is the one reader of such files:

- :func:`read_file` reads a file safely: it never opens a FIFO or a device (the type is checked
  on an ``O_PATH`` descriptor before the file is opened for reading) and never reads more than
  :data:`MAX_CONFIG_BYTES`.
- A plugin that reads configuration files at load **declares** them (:class:`DeclaresFiles`):
  this is the registry every such feature joins, so :mod:`tether.kernel._workspace_trust` can
  read each one before anything loads, digest it, and check the user trusted that content.
- :class:`WorkspaceFiles`, service ``workspace_files``, then serves the plugin the very bytes
  that were checked (a file changed in between is not read again), and refuses a workspace
  file nobody declared.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Protocol, TypeVar, runtime_checkable

from tether.errors import TetherError
from tether.kernel._config import ConfigFileError
from tether.kernel._keys import ServiceKey
from tether.kernel._printable import printable

MAX_CONFIG_BYTES: Final = 1024 * 1024
"""The largest configuration file tether reads."""

MAX_TOTAL_BYTES: Final = 16 * MAX_CONFIG_BYTES
"""The most it reads for one composition, all files together."""

ABSENT: Final = "absent"
"""The recorded state of a file that does not exist."""


class UndeclaredWorkspaceFileError(TetherError):
    """A plugin read a workspace file it had not declared, so nobody checked it."""

    code = "WORKSPACE_FILE_UNDECLARED"


C_contra = TypeVar("C_contra", contravariant=True)


@runtime_checkable
class DeclaresFiles(Protocol[C_contra]):
    """A plugin that reads configuration files when it loads.

    ``workspace_files(config, workspace)`` gets the plugin's validated config and the canonical
    workspace root and returns every file it will read (absolute, or relative to the
    workspace), whether or not it exists now: a file that appears later must be trusted too.
    """

    def workspace_files(self, config: C_contra, workspace: str) -> Sequence[str]: ...


@dataclass(frozen=True, slots=True)
class FileSnapshot:
    """One file as read: its bytes, or why there are none."""

    key: str
    """The file's name in reports and trust records: relative to the workspace when it lies
    there (``tether.toml``, ``.claude/settings.json``), else its absolute path."""
    path: str
    """The absolute (normalised, not resolved) path that was read."""
    content: bytes | None
    """``None`` when the file is absent or unreadable."""
    error: str | None = None
    """Why the file could not be read (a directory, a FIFO, too large, no permission)."""

    @property
    def state(self) -> str:
        """What a trust record keeps: ``absent``, ``sha256:<hex>``, or ``unreadable``."""
        if self.error is not None:
            return "unreadable"
        if self.content is None:
            return ABSENT
        return "sha256:" + hashlib.sha256(self.content).hexdigest()

    def require(self) -> bytes | None:
        """The bytes (``None`` when absent); an unreadable file raises ``CONFIG_FILE``."""
        if self.error is not None:
            raise ConfigFileError(f"{printable(self.key)}: cannot read: {self.error}")
        return self.content


def locate(root: str, path: str) -> tuple[str, str, bool]:
    """``(key, absolute path, inside)`` for ``path`` (absolute, or relative to ``root``).

    Inside means the workspace can change it: the path lies under ``root``, or resolves
    there (a link from elsewhere into the workspace).
    """
    absolute = os.path.normpath(os.path.join(root, path))
    lexical = _under(absolute, root)
    try:
        resolved = os.path.realpath(absolute)
    except ValueError:  # a NUL byte: nothing can be opened there (read_file says so)
        resolved = absolute
    inside = lexical or _under(resolved, root)
    return (os.path.relpath(absolute, root) if lexical else absolute), absolute, inside


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def read_file(key: str, path: str) -> FileSnapshot:
    """Read ``path`` without following it into anything but a regular file."""
    opened = read_prefix(path, MAX_CONFIG_BYTES)
    if isinstance(opened, Unread):
        return FileSnapshot(key, path, None, opened.error)
    if opened.size > MAX_CONFIG_BYTES:
        return FileSnapshot(key, path, None, f"larger than {MAX_CONFIG_BYTES} bytes")
    return FileSnapshot(key, path, opened.data)


@dataclass(frozen=True, slots=True)
class Prefix:
    """The first bytes of a regular file, with what identifies it."""

    data: bytes
    size: int
    """How many bytes the file had: more than ``data`` when it was longer than the limit."""
    location: str
    """Where the opened file really is (links resolved)."""
    stat: os.stat_result


@dataclass(frozen=True, slots=True)
class Unread:
    """Nothing was read: ``error`` is ``None`` when the file does not exist, else why not."""

    error: str | None


def read_prefix(
    path: str, limit: int, vet: Callable[[str, os.stat_result], str | None] | None = None
) -> Prefix | Unread:
    """At most ``limit`` bytes of ``path`` (and its size), never opening a FIFO or a device:
    the type is checked on an ``O_PATH`` descriptor before the file is opened for reading.
    ``vet`` sees where the file really is (and its ``stat``) before a byte is read, and may
    refuse it with a reason."""
    try:
        handle = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return Unread(None)
    except ValueError:
        return Unread("the path contains a NUL byte")
    except OSError as err:
        return Unread(err.strerror or str(err))
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            return Unread("not a regular file")
        location = os.readlink(f"/proc/self/fd/{handle}")
        refusal = vet(location, info) if vet is not None else None
        if refusal is not None:
            return Unread(refusal)
        # Reopening the O_PATH descriptor opens the very inode whose type was checked, even
        # if the name was swapped for a FIFO or a device in between.
        reader = os.open(f"/proc/self/fd/{handle}", os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY)
        with os.fdopen(reader, "rb") as stream:
            data = stream.read(limit + 1)
    except OSError as err:
        return Unread(err.strerror or str(err))
    finally:
        os.close(handle)
    return Prefix(data[:limit], max(info.st_size, len(data)), location, info)


class WorkspaceFiles:
    """Service ``workspace_files``: the checked configuration files, and the one way plugins
    read configuration files.

    ``snapshots`` are the files read (and checked) before the plugins loaded, by key. With
    ``ignored``, the workspace's configuration is not used: a workspace file reads as absent.
    """

    def __init__(
        self, root: str, snapshots: Mapping[str, FileSnapshot], *, ignored: bool = False
    ) -> None:
        self.root = root
        self.snapshots: Mapping[str, FileSnapshot] = MappingProxyType(dict(snapshots))
        self.ignored = ignored

    def read(self, path: str) -> bytes | None:
        """The bytes of a declared file as checked (``None``: absent); a file outside the
        workspace that the workspace's configuration did not name is the caller's own and is
        read now. Raises ``CONFIG_FILE`` (unreadable) or ``WORKSPACE_FILE_UNDECLARED``."""
        key, absolute, inside = locate(self.root, path)
        snapshot = self.snapshots.get(key)
        if snapshot is not None:
            return snapshot.require()
        if inside:
            if self.ignored:
                return None
            raise UndeclaredWorkspaceFileError(
                f"{printable(key)} is in workspace {printable(self.root)} but its plugin did not "
                "declare it (workspace_files), so its content was never checked for trust; it "
                "was not read"
            )
        return read_file(key, absolute).require()


WORKSPACE_FILES: Final = ServiceKey[WorkspaceFiles]("workspace_files")
"""The :class:`WorkspaceFiles` a harness composes."""

__all__ = [
    "ABSENT",
    "MAX_CONFIG_BYTES",
    "MAX_TOTAL_BYTES",
    "WORKSPACE_FILES",
    "DeclaresFiles",
    "FileSnapshot",
    "Prefix",
    "UndeclaredWorkspaceFileError",
    "Unread",
    "WorkspaceFiles",
    "locate",
    "read_file",
    "read_prefix",
]
