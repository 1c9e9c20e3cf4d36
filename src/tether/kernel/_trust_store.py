"""Trust records: which workspace configuration the user has trusted, kept outside every
workspace, in ``<config dir>/trusted-workspaces/`` (:func:`tether._dirs.config_dir`).

One JSON file per workspace, named by a digest of its canonical path::

    {"version": 1, "workspace": "/home/me/project", "trusted_at": 1700000000000,
     "digest": "sha256:…", "files": {"tether.toml": "sha256:…", ".claude/settings.json": "absent"}}

``files`` maps each file's key to the state it had when it was trusted (``absent`` included,
so a file that appears later is new). Directories are created 0700 and files written 0600,
atomically (a temporary file renamed into place), so a reader never sees half a record. A
record that is not the current user's, is writable by others, or is malformed is never taken
as trust: reading it raises :class:`TrustStoreError`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Final

from tether._dirs import config_dir
from tether.errors import TetherError

TRUST_DIR: Final = "trusted-workspaces"
RECORD_VERSION: Final = 1


class TrustStoreError(TetherError):
    """The trust records cannot be read or written safely; the message names the path."""

    code = "TRUST_STORE"


def files_digest(files: Mapping[str, str]) -> str:
    """The digest of a workspace's configuration: every file's key and state."""
    canonical = json.dumps(sorted(files.items()), ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class TrustRecord:
    workspace: str
    """The canonical workspace path."""
    files: Mapping[str, str]
    """Key → state when trusted (``absent`` or ``sha256:<hex>``)."""
    trusted_at: int
    """Epoch milliseconds."""

    @property
    def digest(self) -> str:
        return files_digest(self.files)


class TrustStore:
    """The records in one directory (by default :meth:`for_user`'s)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @classmethod
    def for_user(cls, env: Mapping[str, str] | None = None) -> TrustStore:
        return cls(config_dir(env) / TRUST_DIR)

    def path_for(self, workspace: str) -> Path:
        name = hashlib.sha256(workspace.encode("utf-8", "surrogateescape")).hexdigest()[:32]
        return self.directory / f"{name}.json"

    def inside(self, workspace: str) -> bool:
        """True when the records would live inside ``workspace``, where its agents can write:
        such records cannot vouch for it."""
        real = os.path.realpath(self.directory)
        return real == workspace or real.startswith(workspace.rstrip("/") + "/")

    # -- reading -------------------------------------------------------------------------------
    def get(self, workspace: str) -> TrustRecord | None:
        """The record for a canonical workspace path, or ``None`` when there is none."""
        path = self.path_for(workspace)
        if not self._safe_dir(must_exist=False):
            return None
        record = self._load(path)
        if record is not None and record.workspace != workspace:
            raise TrustStoreError(
                f"trust record {path} is for {record.workspace!r}, not {workspace!r}; "
                f"remove it and trust the workspace again"
            )
        return record

    def records(self) -> list[TrustRecord | TrustStoreError]:
        """Every record, oldest first; an unusable one is reported in its place."""
        if not self._safe_dir(must_exist=False):
            return []
        found: list[TrustRecord | TrustStoreError] = []
        for path in sorted(self.directory.glob("*.json")):
            try:
                record = self._load(path)
            except TrustStoreError as err:
                found.append(err)
                continue
            if record is not None:
                found.append(record)
        return sorted(found, key=lambda r: r.trusted_at if isinstance(r, TrustRecord) else 0)

    def _safe_dir(self, *, must_exist: bool) -> bool:
        """Check the records' directory and its parent are the user's and closed to others."""
        for directory in (self.directory.parent, self.directory):
            try:
                # A link is followed (dotfile managers link ~/.config/tether); records that end
                # up inside a workspace through one are caught by ``inside``, which resolves.
                info = os.stat(directory)
            except FileNotFoundError:
                if must_exist:
                    raise TrustStoreError(f"{directory} does not exist") from None
                return False
            except OSError as err:
                raise TrustStoreError(f"{directory}: cannot read: {err.strerror}") from err
            _check_private(directory, info, want_dir=True)
        return True

    def _load(self, path: Path) -> TrustRecord | None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except FileNotFoundError:
            return None
        except OSError as err:
            raise TrustStoreError(f"trust record {path}: cannot read: {err.strerror}") from err
        with os.fdopen(fd, "rb") as stream:
            _check_private(path, os.fstat(stream.fileno()), want_dir=False)
            data = stream.read(1024 * 1024)
        try:
            raw = json.loads(data)
            files = raw["files"]
            record = TrustRecord(
                workspace=raw["workspace"],
                files=MappingProxyType(dict(files)),
                trusted_at=raw["trusted_at"],
            )
            valid = (
                raw["version"] == RECORD_VERSION
                and isinstance(record.workspace, str)
                and isinstance(files, dict)
                and all(isinstance(k, str) and isinstance(v, str) for k, v in files.items())
                and isinstance(record.trusted_at, int)
                and raw["digest"] == record.digest
            )
        except (ValueError, KeyError, TypeError, RecursionError) as err:
            raise TrustStoreError(
                f"trust record {path} is damaged ({err}); remove it and trust the workspace again"
            ) from err
        if not valid:
            raise TrustStoreError(
                f"trust record {path} is damaged; remove it and trust the workspace again"
            )
        return record

    # -- writing -------------------------------------------------------------------------------
    def put(self, workspace: str, files: Mapping[str, str]) -> TrustRecord:
        """Record that ``workspace`` is trusted with exactly ``files``; replaces any record."""
        if self.inside(workspace):
            raise TrustStoreError(
                f"trust records would be kept in {self.directory}, inside workspace "
                f"{workspace} itself, where its agents can write them: set XDG_CONFIG_HOME to "
                "a directory outside the workspace (or trust it for one run only)"
            )
        record = TrustRecord(workspace, MappingProxyType(dict(files)), int(time.time() * 1000))
        body = {
            "version": RECORD_VERSION,
            "workspace": workspace,
            "trusted_at": record.trusted_at,
            "digest": record.digest,
            "files": dict(sorted(files.items())),
        }
        self._write(self.path_for(workspace), json.dumps(body, ensure_ascii=False, indent=2))
        return record

    def remove(self, workspace: str) -> bool:
        """Forget the record for ``workspace``; ``False`` when there was none."""
        path = self.path_for(workspace)
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        except OSError as err:
            raise TrustStoreError(f"{path}: cannot remove: {err.strerror}") from err
        _sync_dir(self.directory)
        return True

    def _write(self, path: Path, text: str) -> None:
        try:
            for directory in (self.directory.parent, self.directory):
                with contextlib.suppress(FileExistsError):
                    directory.mkdir(mode=0o700, parents=True)
            self._safe_dir(must_exist=True)
            fd, temp = tempfile.mkstemp(dir=self.directory, prefix=".record-", suffix=".tmp")
        except OSError as err:
            raise TrustStoreError(f"{self.directory}: cannot write: {err.strerror}") from err
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as stream:
                stream.write(text + "\n")
                stream.flush()
                os.fsync(stream.fileno())
            os.replace(temp, path)
        except OSError as err:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise TrustStoreError(f"{path}: cannot write: {err.strerror}") from err
        _sync_dir(self.directory)


def _check_private(path: Path, info: os.stat_result, *, want_dir: bool) -> None:
    kind_ok = stat.S_ISDIR(info.st_mode) if want_dir else stat.S_ISREG(info.st_mode)
    if not kind_ok:
        kind = "a directory" if want_dir else "a regular file"
        raise TrustStoreError(f"{path} is not {kind}; trust records are kept only there")
    if info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise TrustStoreError(
            f"{path} is not private to you (owner uid {info.st_uid}, mode "
            f"{stat.S_IMODE(info.st_mode):o}), so others could forge trust: "
            f"make it yours and chmod go-w {path}"
        )


def _sync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


__all__ = [
    "RECORD_VERSION",
    "TRUST_DIR",
    "TrustRecord",
    "TrustStore",
    "TrustStoreError",
    "files_digest",
]
