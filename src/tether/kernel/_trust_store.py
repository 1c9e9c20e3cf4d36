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

import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Final

from tether._dirs import config_dir
from tether.errors import TetherError
from tether.kernel._private_files import PrivateDirectory

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
        self._files = PrivateDirectory(directory, "trust records", "forge trust", TrustStoreError)

    @classmethod
    def for_user(cls, env: Mapping[str, str] | None = None) -> TrustStore:
        return cls(config_dir(env) / TRUST_DIR)

    def path_for(self, workspace: str) -> Path:
        name = hashlib.sha256(workspace.encode("utf-8", "surrogateescape")).hexdigest()[:32]
        return self.directory / f"{name}.json"

    def inside(self, workspace: str) -> bool:
        """True when the records would live inside ``workspace``, where its agents can write:
        such records cannot vouch for it."""
        return self._files.inside(workspace)

    # -- reading -------------------------------------------------------------------------------
    def get(self, workspace: str) -> TrustRecord | None:
        """The record for a canonical workspace path, or ``None`` when there is none."""
        path = self.path_for(workspace)
        if not self._files.safe(must_exist=False):
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
        if not self._files.safe(must_exist=False):
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

    def _load(self, path: Path) -> TrustRecord | None:
        data = self._files.read(path, "trust record")
        if data is None:
            return None
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
        self._files.write(self.path_for(workspace), json.dumps(body, ensure_ascii=False, indent=2))
        return record

    def remove(self, workspace: str) -> bool:
        """Forget the record for ``workspace``; ``False`` when there was none."""
        return self._files.remove(self.path_for(workspace))


__all__ = [
    "RECORD_VERSION",
    "TRUST_DIR",
    "TrustRecord",
    "TrustStore",
    "TrustStoreError",
    "files_digest",
]
