"""``tether doctor``: what this installation would use, and whether it works.

Each line is a check with ``ok`` or ``problem`` and the reason. Exit 1 when a check that a run
needs (the store) fails; a missing model configuration is reported but is not fatal, because
``--model`` can still be given per run, and neither is untrusted workspace configuration
(``tether trust`` or ``--trust-workspace`` settle it). Hook files of the workspace that a run
would not use get ``hooks: problem:`` lines (:mod:`tether.surfaces.cli._hook_warnings`); the
permission rules a run would apply are counted by decision and source, the grants of the
workspace's newest session too, and rules that are not applied get ``permissions: problem:``
lines.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from typing import Annotated

import typer

from tether import __version__
from tether._dirs import config_dir
from tether._harness import Harness
from tether.agent._instructions import ProjectInstructions
from tether.errors import TetherError
from tether.kernel import WorkspaceTrust
from tether.kernel._config import available_plugins
from tether.kernel._printable import printable
from tether.kernel._workspace_trust import FileStatus, InspectedWorkspace, trust_command_line
from tether.model._openai_compat import PRESETS
from tether.model._settings import choose_model, load_model_config, user_config_path
from tether.policy._grants import fold_grants
from tether.policy._rule_sources import load_permission_rules
from tether.policy._rules import RULE_DECISIONS
from tether.sandbox._paths import default_rules
from tether.sandbox._provider import describe_backends
from tether.surfaces.cli._common import (
    StoreNotFoundError,
    StoreOption,
    opened_store,
    run,
    store_url,
)
from tether.surfaces.cli._hook_warnings import hook_warning_lines, permission_warning_lines
from tether.surfaces.cli._id_prefix import newest_root


def doctor_command(
    store: StoreOption = None,
    workspace: Annotated[
        str,
        typer.Option(
            "--workspace",
            metavar="DIR",
            help="Workspace whose configuration to check (default: cwd).",
        ),
    ] = ".",
) -> None:
    """Show the model configuration, the store, the sandbox, the plugins and the workspace."""
    typer.echo(f"tether {__version__}")
    fatal = False
    url = store_url(store)
    inspected: InspectedWorkspace | TetherError
    try:
        inspected = Harness.inspect_workspace(workspace=workspace, store=url)
    except TetherError as err:
        inspected = err
    typer.echo(_model_line(os.environ, inspected))
    try:
        count = run(_count_sessions(store))
        typer.echo(f"store: ok: {url} ({count} sessions)")
    except typer.Exit:
        fatal = True
    try:
        # Runners inside the workspace are rejected before anything is probed, as tether run
        # does: probing a planted bwrap would run it, as this user, unconfined.
        reports = describe_backends(workspace=workspace)
    except TetherError as err:
        reports = []
        typer.echo(f"sandbox: problem: {err.code}: {printable(str(err))}")
    for report in reports:
        typer.echo(f"sandbox {report.name}: {report.status}: {printable(report.reason)}")
        for aspect, how in report.enforces:  # what it confines (docs/sandbox.md)
            typer.echo(f"  {aspect}: {how}")
    plugins = available_plugins()
    typer.echo(f"plugins: {', '.join(sorted(plugins)) or 'none'}")
    for line in _instruction_lines(workspace):
        typer.echo(line)
    if isinstance(inspected, TetherError):
        typer.echo(f"workspace: problem: {inspected.code}: {printable(str(inspected))}")
    else:
        for line in _workspace_lines(inspected):
            typer.echo(line)
        for line in hook_warning_lines(inspected):
            typer.echo(f"hooks: problem: {line}")
        for line in _permission_lines(inspected, store):
            typer.echo(line)
    if fatal:
        raise typer.Exit(1)


def _model_line(env: Mapping[str, str], inspected: InspectedWorkspace | TetherError) -> str:
    """The model a run without ``--model`` would use, and where its key would go. The
    workspace's configuration counts only when it is trusted, as it does for a run."""
    trusted = (
        isinstance(inspected, InspectedWorkspace)
        and not inspected.untrusted()
        and inspected.problem is None
    )
    used = inspected.config if trusted and isinstance(inspected, InspectedWorkspace) else None
    try:
        chosen = choose_model(None, env, load_model_config(env, used))
    except TetherError as err:
        if env.get("TETHER_MODEL", "").strip():
            return f"model: problem: {printable(str(err).splitlines()[0])}"
        return (
            "model: problem: no model configured (pass --model SPEC, set TETHER_MODEL, or "
            f"set [model] default in {printable(str(user_config_path(env)))})"
        )
    name = printable(chosen.name)
    if chosen.spec.kind == "scripted":
        return f"model: ok: {name}"
    profile = chosen.profile
    url, key, _ = PRESETS[chosen.spec.kind].destination(env, profile.base_url, profile.api_key_env)
    if key is not None and not env.get(key, "").strip():
        return f"model: problem: {name} needs {key}"
    sends = f"sends {key} to {url}" if key is not None else f"sends no API key to {url}"
    return f"model: ok: {name} ({chosen.origin}; {printable(sends)})"


async def _count_sessions(store: str | None) -> int:
    async with opened_store(store, in_memory=True) as persistence:
        return len(await persistence.list())


def _workspace_lines(inspected: InspectedWorkspace) -> list[str]:
    """The workspace's trust, then one line per configuration file: active or not, and why."""
    root = printable(inspected.root)
    untrusted = inspected.untrusted()
    if untrusted:
        listed = ", ".join(f"{printable(r.key)}: {r.status}" for r in untrusted)
        why = f"; {printable(inspected.distrust)}" if inspected.distrust else ""
        head = (
            f"workspace: problem: {root} has configuration you have not trusted ({listed}{why}); "
            f"tether run refuses it until you run: {trust_command_line(inspected.root)}"
        )
    elif inspected.problem is not None:
        head = (
            f"workspace: problem: {root}: {inspected.problem.code}: "
            f"{printable(str(inspected.problem))}"
        )
    elif inspected.present():
        head = f"workspace: ok: {root} (configuration trusted)"
    else:
        head = f"workspace: ok: {root} (no configuration files)"
    lines = [head]
    for report in inspected.reports:
        if report.status is FileStatus.ABSENT:
            state = "absent"
        elif report.status is FileStatus.TRUSTED:
            state = "active (trusted)"
        else:
            state = f"inactive ({report.status}, not trusted)"
        lines.append(f"workspace file {printable(report.key)}: {state}")
    return lines


def _permission_lines(inspected: InspectedWorkspace, store: str | None) -> list[str]:
    """How many permission rules a run would apply, by decision and by source; the grants
    of the workspace's newest session; then what is not applied, and why."""
    try:
        rules = load_permission_rules(inspected)
    except TetherError as err:
        return [f"permissions: problem: {err.code}: {printable(str(err))}"]
    applied = rules.rules()
    by_decision = ", ".join(
        f"{decision} {sum(r.decision == decision for r in applied)}" for decision in RULE_DECISIONS
    )
    sources = Counter(r.file or r.origin.value for r in applied)
    where = "; ".join(f"{printable(file)}: {count}" for file, count in sources.items())
    untrusted = inspected.trust is WorkspaceTrust.RECORDED and bool(inspected.untrusted())
    note = " (the workspace's own are not counted until it is trusted)" if untrusted else ""
    lines = [
        f"permissions: ok: {len(applied)} rules ({by_decision})"
        + (f" from {where}" if where else "")
        + note
    ]
    try:
        grants = run(_newest_grants(store, inspected.root))
    except typer.Exit:
        grants = None
    if grants is not None:
        session_id, count = grants
        lines.append(
            f"grants: {count} session grant{'s' if count != 1 else ''} in the newest session "
            f"of this workspace ({session_id}); tether grants list shows them"
        )
    if rules.store_problem is not None:
        lines.append(f"permissions: problem: {printable(rules.store_problem)}")
    lines += [f"permissions: problem: {line}" for line in permission_warning_lines(inspected)]
    return lines


async def _newest_grants(store: str | None, workspace: str) -> tuple[str, int] | None:
    """The newest top-level session of ``workspace`` and how many grants it holds."""
    try:
        async with opened_store(store, existing=True) as persistence:
            newest = newest_root(await persistence.list(), workspace)
            if newest is None:
                return None
            stored = await persistence.inspect(newest.id)
    except StoreNotFoundError:
        return None
    return newest.id, len(fold_grants(stored.header, stored.events))


def _instruction_lines(workspace: str) -> list[str]:
    """The project instructions a new session in ``workspace`` would read, in their order."""
    loaded = ProjectInstructions(rules=default_rules).load(workspace)
    if not loaded.used and not loaded.skipped:
        return [
            "instructions: none (no AGENTS.md or CLAUDE.md in the workspace, the directories "
            f"above it up to the repository root, or {printable(str(config_dir()))})"
        ]
    lines = [
        f"instructions: {len(loaded.used)} used, {loaded.used_bytes} bytes (each new session "
        "reads them at its first turn)"
    ]
    for used in loaded.used:
        cut = f" of {used.size}, truncated" if used.truncated else ""
        lines.append(
            f"instructions file {printable(used.shown)}: used ({used.used} bytes{cut}, "
            f"sha256 {used.sha256})"
        )
    for skipped in loaded.skipped:
        lines.append(
            f"instructions file {printable(skipped.shown)}: skipped ({printable(skipped.reason)})"
        )
    return lines
