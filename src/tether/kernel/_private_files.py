"""Files only the user may write, kept in tether's configuration directory: workspace trust
records (:mod:`tether.kernel._trust_store`) and the permission rules ``allowed-always`` answers
add (:mod:`tether.policy._rule_store`).

Both decide what an agent may do, so both are read and written the same careful way: the
directory and its parent must be the user's and closed to others (0700 when created), each
file is a regular file of the user's, not writable by others (0600 when written), opened
without following a link, and written atomically (a temporary file renamed into place, then
the directory synced), so a reader never sees half a file. A file or directory that fails a
check is never used: the caller's error says which and how to fix it.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tether.errors import TetherError
from tether.kernel._real_path import real_path

MAX_PRIVATE_BYTES: Final = 1024 * 1024
"""The most read of one such file."""


@dataclass(frozen=True, slots=True)
class PrivateDirectory:
    """One directory of private files; ``what`` names its files in errors (``trust
    records``), ``forged`` what others could do were it open to them (``forge trust``), and
    ``error`` is the error class raised (with the path in the message)."""

    directory: Path
    what: str
    forged: str
    error: type[TetherError]

    def inside(self, workspace: str) -> bool:
        """True when the files would live inside ``workspace``, where its agents can write."""
        real = real_path(str(self.directory))
        return real == workspace or real.startswith(workspace.rstrip("/") + "/")

    def safe(self, *, must_exist: bool) -> bool:
        """Check the directory and its parent are the user's and closed to others; ``False``
        when one does not exist (and ``must_exist`` is false)."""
        for directory in (self.directory.parent, self.directory):
            try:
                # A link is followed (dotfile managers link ~/.config/tether); files that end
                # up inside a workspace through one are caught by ``inside``, which resolves.
                info = os.stat(directory)
            except FileNotFoundError:
                if must_exist:
                    raise self.error(f"{directory} does not exist") from None
                return False
            except OSError as err:
                raise self.error(f"{directory}: cannot read: {err.strerror}") from err
            self.check(directory, info, want_dir=True)
        return True

    def check(self, path: Path, info: os.stat_result, *, want_dir: bool) -> None:
        kind_ok = stat.S_ISDIR(info.st_mode) if want_dir else stat.S_ISREG(info.st_mode)
        if not kind_ok:
            kind = "a directory" if want_dir else "a regular file"
            raise self.error(f"{path} is not {kind}; {self.what} are kept only there")
        if info.st_uid != os.geteuid() or info.st_mode & 0o022:
            raise self.error(
                f"{path} is not private to you (owner uid {info.st_uid}, mode "
                f"{stat.S_IMODE(info.st_mode):o}), so others could {self.forged}: "
                f"make it yours and chmod go-w {path}"
            )

    def read(self, path: Path, label: str) -> bytes | None:
        """The bytes of ``path`` (at most :data:`MAX_PRIVATE_BYTES`), ``None`` when it does
        not exist; ``label`` names it in errors (``trust record``)."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except FileNotFoundError:
            return None
        except OSError as err:
            raise self.error(f"{label} {path}: cannot read: {err.strerror}") from err
        with os.fdopen(fd, "rb") as stream:
            self.check(path, os.fstat(stream.fileno()), want_dir=False)
            return stream.read(MAX_PRIVATE_BYTES)

    def ensure(self) -> None:
        """Create the directory (0700) when missing, then check it as :meth:`safe` does."""
        try:
            for directory in (self.directory.parent, self.directory):
                with contextlib.suppress(FileExistsError):
                    directory.mkdir(mode=0o700, parents=True)
        except OSError as err:
            raise self.error(f"{self.directory}: cannot write: {err.strerror}") from err
        self.safe(must_exist=True)

    def write(self, path: Path, text: str) -> None:
        """Replace ``path`` with ``text`` (and a final newline), atomically."""
        self.ensure()
        try:
            fd, temp = tempfile.mkstemp(dir=self.directory, prefix=".record-", suffix=".tmp")
        except OSError as err:
            raise self.error(f"{self.directory}: cannot write: {err.strerror}") from err
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as stream:
                stream.write(text + "\n")
                stream.flush()
                os.fsync(stream.fileno())
            os.replace(temp, path)
        except OSError as err:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise self.error(f"{path}: cannot write: {err.strerror}") from err
        sync_dir(self.directory)

    def remove(self, path: Path) -> bool:
        """Remove ``path``; ``False`` when there was none."""
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        except OSError as err:
            raise self.error(f"{path}: cannot remove: {err.strerror}") from err
        sync_dir(self.directory)
        return True


def sync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


__all__ = ["MAX_PRIVATE_BYTES", "PrivateDirectory", "sync_dir"]
