"""The startup warning of ``tether run`` and ``tether chat`` about hook and permission files
in the workspace that the run will not use (:mod:`tether.plugins.hooks._workspace_check`,
:func:`tether.policy._rule_sources.unused_settings_lines`), and about permission rules it
reads but cannot apply in full."""

from __future__ import annotations

from collections.abc import Sequence

import typer

from tether._harness import Harness
from tether.errors import TetherError
from tether.kernel import PluginEntry, WorkspaceTrust
from tether.kernel._printable import printable
from tether.kernel._workspace_trust import InspectedWorkspace
from tether.plugins.hooks._workspace_check import unused_hook_configs, warning_lines
from tether.policy._rule_sources import load_permission_rules, unused_settings_lines


def hook_warning_lines(inspected: InspectedWorkspace) -> list[str]:
    """What ``run``, ``chat`` and ``doctor`` say about ``inspected``'s unused hook files."""
    return warning_lines(unused_hook_configs(inspected), inspected)


def permission_warning_lines(inspected: InspectedWorkspace) -> list[str]:
    """What they say about permission rules: settings files whose rules are not applied,
    and rules that are read but not applied as written (escaped)."""
    lines = unused_settings_lines(inspected)
    if inspected.trust is WorkspaceTrust.RECORDED and inspected.untrusted():
        return lines
    try:
        loaded = load_permission_rules(inspected)
    except TetherError:
        return lines  # opening the harness reports it, with its code
    return lines + [printable(warning) for warning in loaded.warnings]


def warn_unused_hooks(
    workspace: str, plugins: Sequence[PluginEntry], store: str, trust: WorkspaceTrust
) -> None:
    """One line on stderr per unused hook or permissions file; never enables anything."""
    try:
        inspected = Harness.inspect_workspace(
            workspace=workspace, plugins=plugins, store=store, workspace_trust=trust
        )
    except TetherError:
        return  # opening the harness reports it, with its code
    if inspected.trust is WorkspaceTrust.RECORDED and inspected.untrusted():
        return  # the run refuses untrusted configuration, naming each file
    for line in hook_warning_lines(inspected) + permission_warning_lines(inspected):
        typer.echo(f"tether: warning: {line}", err=True)


__all__ = ["hook_warning_lines", "permission_warning_lines", "warn_unused_hooks"]
