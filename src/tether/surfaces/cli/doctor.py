"""``tether doctor``: what this installation would use, and whether it works.

Each line is a check with ``ok`` or ``problem`` and the reason. Exit 1 when a check that a run
needs (the store) fails; a missing model configuration is reported but is not fatal, because
``--model`` can still be given per run, and neither is untrusted workspace configuration
(``tether trust`` or ``--trust-workspace`` settle it).
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from tether import __version__
from tether.agent import ProjectInstructions
from tether.dirs import config_dir
from tether.errors import TetherError
from tether.harness import Harness
from tether.kernel import FileStatus, InspectedWorkspace, available_plugins
from tether.kernel.printable import printable
from tether.kernel.workspace_trust import trust_command_line
from tether.model import parse_model_spec
from tether.sandbox import default_rules, describe_backends
from tether.surfaces.cli.common import StoreOption, opened_store, run, store_url

KEY_FOR = {"openai": "OPENAI_API_KEY", "deepseek": "DEEPSEEK_API_KEY"}


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
    typer.echo(_model_line(os.environ))
    url = store_url(store)
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
    try:
        for line in _workspace_lines(Harness.inspect_workspace(workspace=workspace, store=url)):
            typer.echo(line)
    except TetherError as err:
        typer.echo(f"workspace: problem: {err.code}: {printable(str(err))}")
    if fatal:
        raise typer.Exit(1)


def _model_line(env: os._Environ[str] | dict[str, str]) -> str:
    spec = env.get("TETHER_MODEL")
    if not spec:
        return "model: problem: TETHER_MODEL is not set (pass --model scripted:PATH, openai:MODEL or deepseek:MODEL)"
    try:
        parsed = parse_model_spec(spec)
    except TetherError as err:
        return f"model: problem: {err}"
    key = KEY_FOR.get(parsed.kind)
    if key is not None and not env.get(key):
        return f"model: problem: {spec} needs {key}"
    return f"model: ok: {spec}"


async def _count_sessions(store: str | None) -> int:
    async with opened_store(store) as persistence:
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
