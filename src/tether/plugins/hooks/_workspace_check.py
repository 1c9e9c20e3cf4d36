"""Hook configuration in a workspace that a run does not use, said out loud.

A user coming from Claude Code or Codex has ``.claude/settings.json`` (or ``._codex/hooks.json``)
with a guard hook in it and expects it to run. tether runs a workspace's hook files only when
``tether.toml`` lists them for the ``hooks`` plugin and the user trusted that content
(workspace trust), so a file that is not listed, or not trusted, is silently inert: its guard
fails open. :func:`unused_hook_configs` finds such files and :func:`warning_lines` says, in
one escaped line each, what is not enabled and how to enable it. The check only reads (with
the same safe reader as workspace trust) and never enables anything.

Claude Code's ``permissions`` rules in the same files are applied once their content is
trusted; :func:`tether.policy._rule_sources.unused_settings_lines` says when they are not.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from pydantic import ValidationError

from tether.kernel import WorkspaceTrust
from tether.kernel._printable import printable
from tether.kernel._workspace_files import read_file
from tether.kernel._workspace_trust import FileStatus, InspectedWorkspace, trust_command_line
from tether.plugins.hooks._plugin import HooksConfig
from tether.plugins.hooks._settings import CLAUDE_CODE, CODEX, Dialect, settings_paths

CANDIDATES: Final[Mapping[str, Dialect]] = {
    ".claude/settings.json": CLAUDE_CODE,
    ".claude/settings.local.json": CLAUDE_CODE,
    ".codex/hooks.json": CODEX,
    ".codex/config.toml": CODEX,
}
"""The workspace files Claude Code and Codex read hooks from, and their dialect."""

_OPTION: Final[Mapping[Dialect, str]] = {CLAUDE_CODE: "settings_files", CODEX: "codex_files"}


@dataclass(frozen=True, slots=True)
class UnusedHookConfig:
    """One workspace file with hooks a run does not run."""

    key: str
    """The file, relative to the workspace (``.claude/settings.json``)."""
    dialect: Dialect
    events: tuple[str, ...]
    """The hook events it configures that this run will not run."""
    listed: bool = False
    """A ``hooks`` plugin lists it, but its content is not trusted (so it is not used)."""


def unused_hook_configs(inspected: InspectedWorkspace) -> list[UnusedHookConfig]:
    """The candidate files of ``inspected``'s workspace that have hooks the composition would
    not run (not listed for the ``hooks`` plugin, or the workspace's configuration ignored).
    A file that cannot be read or parsed is left out: the run never reads it either, and
    ``tether trust`` shows it."""
    listed = _listed(inspected)
    found: list[UnusedHookConfig] = []
    for key, dialect in CANDIDATES.items():
        path = os.path.join(inspected.root, key)
        content = read_file(key, path).content
        parsed = _parse(content, key) if content is not None else None
        if parsed is None:
            continue
        used = listed.get(path)
        events = () if used else _events(parsed.get("hooks"))
        if events:
            found.append(UnusedHookConfig(key, dialect, events, listed=used is False))
    return found


def warning_lines(found: Sequence[UnusedHookConfig], inspected: InspectedWorkspace) -> list[str]:
    """One line per finding, escaped, each saying how to enable what is not enabled."""
    trust = trust_command_line(inspected.root)
    ignored = inspected.trust is WorkspaceTrust.IGNORE
    lines: list[str] = []
    for item in found:
        key = printable(item.key)
        option = _OPTION[item.dialect]
        kind = "Codex hooks" if item.dialect == CODEX else "hooks"
        if item.listed:
            how = f"its content is not trusted: review and trust it with: {trust}"
        elif ignored:
            how = (
                f"this run ignores the workspace's configuration: trust it with: {trust} "
                f"(with {key} in the hooks plugin's {option} in tether.toml)"
            )
        else:
            how = (
                f"list it in the hooks plugin's {option} in tether.toml, then trust it "
                f"with: {trust}"
            )
        events = ", ".join(printable(e) for e in item.events)
        lines.append(f"{key} has {kind} ({events}) that are not enabled; {how}")
    return lines


def _listed(inspected: InspectedWorkspace) -> dict[str, bool]:
    """The hook files a ``hooks`` plugin of the composition lists: ``True`` when it would read
    them (trusted content, ``once``, or the caller's own file outside the workspace),
    ``False`` when their content is not trusted. None under ``ignore``."""
    if inspected.trust is WorkspaceTrust.IGNORE:
        return {}
    statuses = {r.snapshot.path: r.status for r in inspected.reports}
    out: dict[str, bool] = {}
    for entry in inspected.entries:
        if entry.name != "hooks":
            continue
        try:
            config = HooksConfig.model_validate(entry.config)
        except ValidationError:
            continue  # the load reports it
        base = config.project_dir or inspected.root
        listed = settings_paths([*config.settings_files, *config.codex_files], base)
        for path in map(os.path.normpath, listed):
            out[path] = inspected.trust is WorkspaceTrust.ONCE or statuses.get(path) in (
                FileStatus.TRUSTED,
                None,  # outside the workspace: the caller's own file
            )
    return out


def _parse(content: bytes, key: str) -> Mapping[str, object] | None:
    try:
        text = content.decode("utf-8")
        parsed: object = tomllib.loads(text) if key.endswith(".toml") else json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return parsed if isinstance(parsed, Mapping) else None


def _events(hooks: object) -> tuple[str, ...]:
    if not isinstance(hooks, Mapping):
        return ()
    return tuple(
        str(event)
        for event, groups in hooks.items()
        if isinstance(groups, Sequence) and not isinstance(groups, str) and groups
    )


__all__ = ["CANDIDATES", "UnusedHookConfig", "unused_hook_configs", "warning_lines"]
