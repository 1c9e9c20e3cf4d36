"""The user's own ``allow`` rules for each workspace, added by ``allowed-always`` answers.

Kept outside every workspace, one JSON file per workspace in
``<config dir>/permission-rules/`` (:func:`tether._dirs.config_dir`), read and written as
private files (:class:`~tether.kernel._private_files.PrivateDirectory`: 0700 directories,
0600 files, atomic replacement, never a file that is not the user's or that others may
write)::

    {"version": 1, "workspace": "/home/me/project",
     "rules": [{"id": "…", "rule": "Bash(npm test:*)", "escalate": null, "added_at": 1700000000000,
                "session": "…", "approval": "…", "granted_by": "tether chat (me)"}]}

An agent never writes here: the configuration directory is hidden from every confined command
and file tool (``docs/sandbox.md``, "Hidden and control paths"), a store that would live inside
the workspace is refused, and a rule is added only by the approval service after an answer
from an answerer (``policy/_approval.py``). Changes are made under an exclusive lock of the
directory, so two runs answering at once both keep their rule.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tether._dirs import config_dir
from tether.kernel._private_files import PrivateDirectory
from tether.policy._errors import InvalidModeError, RuleStoreError
from tether.policy._modes import SandboxMode, parse_sandbox_mode

RULES_DIR: Final = "permission-rules"
STORE_VERSION: Final = 1


@dataclass(frozen=True, slots=True)
class StoredRule:
    """One ``allowed-always`` rule and where it came from."""

    id: str
    rule: str
    escalate: SandboxMode | None
    added_at: int
    """Epoch milliseconds."""
    session: str | None = None
    approval: str | None = None
    granted_by: str | None = None

    def to_data(self) -> dict[str, object]:
        return {
            "id": self.id,
            "rule": self.rule,
            "escalate": None if self.escalate is None else self.escalate.value,
            "added_at": self.added_at,
            "session": self.session,
            "approval": self.approval,
            "granted_by": self.granted_by,
        }

    @classmethod
    def from_data(cls, raw: object) -> StoredRule:
        if not isinstance(raw, Mapping):
            raise ValueError("a rule must be an object")
        escalate = raw.get("escalate")
        fields = (raw.get("id"), raw.get("rule"), raw.get("added_at"))
        optional = (raw.get("session"), raw.get("approval"), raw.get("granted_by"))
        if not (
            isinstance(fields[0], str)
            and isinstance(fields[1], str)
            and isinstance(fields[2], int)
            and not isinstance(fields[2], bool)
            and all(value is None or isinstance(value, str) for value in optional)
        ):
            raise ValueError(f"rule {raw!r} does not have the fields of a rule")
        return cls(
            fields[0],
            fields[1],
            None if escalate is None else parse_sandbox_mode(escalate),
            fields[2],
            *(value if isinstance(value, str) else None for value in optional),
        )


@dataclass(frozen=True, slots=True)
class WorkspaceRules:
    workspace: str
    rules: tuple[StoredRule, ...]


class RuleStore:
    """The rule files in one directory (by default :meth:`for_user`'s)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._files = PrivateDirectory(
            directory, "permission rules", "add rules that allow anything", RuleStoreError
        )
        self._paths: dict[str, Path] = {}
        """:meth:`path_for` of each workspace asked about (a name worked out from it alone:
        asked on every tool call, by :meth:`stamp`)."""

    @classmethod
    def for_user(cls, env: Mapping[str, str] | None = None) -> RuleStore:
        return cls(config_dir(env) / RULES_DIR)

    def path_for(self, workspace: str) -> Path:
        path = self._paths.get(workspace)
        if path is None:
            name = hashlib.sha256(workspace.encode("utf-8", "surrogateescape")).hexdigest()[:32]
            path = self._paths[workspace] = self.directory / f"{name}.json"
        return path

    def refusal(self, workspace: str) -> str | None:
        """Why rules for ``workspace`` cannot be kept here (the directory lies inside it,
        where its agents could write), else ``None``."""
        if self._files.inside(workspace):
            return (
                f"permission rules would be kept in {self.directory}, inside workspace "
                f"{workspace} itself, where its agents can write them: set XDG_CONFIG_HOME to "
                "a directory outside the workspace"
            )
        return None

    def stamp(self, workspace: str) -> tuple[int, int, int] | None:
        """What changes when the workspace's file changes (``None``: there is none), so a
        reader can keep what it read until then."""
        try:
            info = os.stat(self.path_for(workspace), follow_symlinks=False)
        except OSError:
            return None
        return (info.st_ino, info.st_mtime_ns, info.st_size)

    # -- reading -------------------------------------------------------------------------------
    def get(self, workspace: str) -> WorkspaceRules:
        """The rules for canonical ``workspace`` (none when there is no file). Raises
        :class:`RuleStoreError` for a file that is damaged, not private, or not for it."""
        if self.refusal(workspace) is not None or not self._files.safe(must_exist=False):
            return WorkspaceRules(workspace, ())
        found = self._load(self.path_for(workspace))
        if found is None:
            return WorkspaceRules(workspace, ())
        if found.workspace != workspace:
            raise RuleStoreError(
                f"permission rules {self.path_for(workspace)} are for {found.workspace!r}, not "
                f"{workspace!r}; remove the file"
            )
        return found

    def all(self) -> list[WorkspaceRules | RuleStoreError]:
        """Every workspace's rules; an unusable file is reported in its place."""
        if not self._files.safe(must_exist=False):
            return []
        out: list[WorkspaceRules | RuleStoreError] = []
        for path in sorted(self.directory.glob("*.json")):
            try:
                found = self._load(path)
            except RuleStoreError as err:
                out.append(err)
                continue
            if found is not None:
                out.append(found)
        return out

    def _load(self, path: Path) -> WorkspaceRules | None:
        data = self._files.read(path, "permission rules")
        if data is None:
            return None
        try:
            raw = json.loads(data)
            if raw["version"] != STORE_VERSION or not isinstance(raw["workspace"], str):
                raise ValueError("not a rules file of this version")
            rules = tuple(StoredRule.from_data(rule) for rule in raw["rules"])
        except (ValueError, KeyError, TypeError, RecursionError, InvalidModeError) as err:
            raise RuleStoreError(
                f"permission rules {path} are damaged ({err}); remove the file (its rules are "
                "not applied meanwhile)"
            ) from err
        return WorkspaceRules(str(raw["workspace"]), rules)

    # -- writing -------------------------------------------------------------------------------
    def add(
        self,
        workspace: str,
        rule: str,
        escalate: SandboxMode | None,
        *,
        session: str | None = None,
        approval: str | None = None,
        granted_by: str | None = None,
    ) -> StoredRule:
        """Add one rule for ``workspace`` (an identical one already there is returned
        instead); :class:`RuleStoreError` when it cannot be kept safely."""
        refusal = self.refusal(workspace)
        if refusal is not None:
            raise RuleStoreError(refusal)
        with self._locked():
            current = self.get(workspace).rules
            for existing in current:
                if existing.rule == rule and existing.escalate == escalate:
                    return existing
            added = StoredRule(
                str(uuid.uuid4()),
                rule,
                escalate,
                int(time.time() * 1000),
                session,
                approval,
                granted_by,
            )
            self._save(workspace, (*current, added))
            return added

    def remove(self, workspace: str, rule_id: str) -> StoredRule | None:
        """Remove the rule ``rule_id`` of ``workspace``; ``None`` when there is none."""
        with self._locked():
            current = self.get(workspace).rules
            kept = tuple(rule for rule in current if rule.id != rule_id)
            if len(kept) == len(current):
                return None
            self._save(workspace, kept)
            return next(rule for rule in current if rule.id == rule_id)

    def _save(self, workspace: str, rules: tuple[StoredRule, ...]) -> None:
        path = self.path_for(workspace)
        if not rules:
            self._files.remove(path)
            return
        body = {
            "version": STORE_VERSION,
            "workspace": workspace,
            "rules": [rule.to_data() for rule in rules],
        }
        self._files.write(path, json.dumps(body, ensure_ascii=False, indent=2))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self._files.ensure()
        try:
            fd = os.open(
                self.directory / ".lock",
                os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
            )
        except OSError as err:
            raise RuleStoreError(f"{self.directory}: cannot lock: {err.strerror}") from err
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


__all__ = ["RULES_DIR", "STORE_VERSION", "RuleStore", "StoredRule", "WorkspaceRules"]
