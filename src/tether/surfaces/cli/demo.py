"""``tether demo``: an offline scripted session in a temporary workspace, narrated.

It needs no API key: the scripted model (``examples/demo.json``, shipped inside the package as
well) drives a root agent whose writes are fenced by the sandbox policy. ``--json`` prints the
event stream instead of the narration.
"""

from __future__ import annotations

import json
import tempfile
from importlib import resources
from pathlib import Path

import typer
from rich.console import Console

from tether.agent.context_snapshot import is_snapshot
from tether.harness import Harness, SessionEvent
from tether.session.json import thaw
from tether.surfaces.cli.common import JsonOption, run

SCRIPT = "demo.json"


def demo_command(json_output: JsonOption = False) -> None:
    """Run the offline demo (no API key needed)."""
    ok = run(_demo(json_output))
    if not ok:
        raise typer.Exit(1)


def _script_path(tmp: Path) -> Path:
    target = tmp / SCRIPT
    target.write_text(resources.files("tether.surfaces.cli").joinpath(SCRIPT).read_text())
    return target


async def _demo(json_output: bool) -> bool:
    console = Console(highlight=False)
    with tempfile.TemporaryDirectory(prefix="tether-demo-") as tmp:
        base = Path(tmp)
        workspace = base / "workspace"
        workspace.mkdir()
        store = f"sqlite://{base / 'tether.db'}"
        script = _script_path(base)
        async with Harness.open(
            workspace=workspace,
            model=f"scripted:{script}",
            store=store,
            sandbox="workspace-write",
            approval="ask",
        ) as harness:
            if not json_output:
                console.print(f"[bold]tether demo[/bold]  workspace: {workspace}")
            async for item in harness.stream("Write notes.txt, then try to write outside."):
                if json_output:
                    typer.echo(_json_line(item))
                else:
                    _narrate(console, item)
            assert harness.root is not None and harness.root.last_result is not None
            result = harness.root.last_result
            outside = base / "outside-the-workspace.txt"
            if not json_output:
                console.print()
                console.print(f"stop reason: [bold]{result.stop_reason}[/bold]")
                console.print(f"notes.txt written: {(workspace / 'notes.txt').exists()}")
                console.print(f"file outside the workspace created: {outside.exists()}")
                console.print(f"session {harness.root.id} stored in {store}")
            return result.stop_reason == "completed" and not outside.exists()


def _json_line(item: SessionEvent) -> str:
    event = item.event
    return json.dumps(
        {"session": item.session_id, "seq": event.seq, "type": event.type, "data": thaw(event.data)}
    )


def _narrate(console: Console, item: SessionEvent) -> None:
    event, data = item.event, item.event.data
    short = item.session_id[:8]
    if event.type == "user/message":
        if is_snapshot(event):
            console.print(f"[dim]{short} runtime context updated[/dim]")
            return
        console.print(f"[cyan]{short} user:[/cyan] {data.get('content')}")
    elif event.type == "assistant/message" and data.get("content"):
        console.print(f"[green]{short} assistant:[/green] {data.get('content')}")
    elif event.type == "tool/call":
        console.print(f"[yellow]{short} tool {data.get('name')}[/yellow] {data.get('arguments')}")
    elif event.type == "tool/result":
        style = "red" if data.get("is_error") else "dim"
        text = str(data.get("content")).splitlines()[0] if data.get("content") else ""
        console.print(f"[{style}]{short}   → {text}[/{style}]")
    elif event.type in (
        "approval/asked",
        "approval/decided",
        "sandbox/mode",
        "approval/policy",
        "permission/preset",
    ):
        console.print(f"[magenta]{short} {event.type}[/magenta] {json.dumps(thaw(data))}")
    elif event.type == "turn/end":
        detail = data.get("error") or data.get("detail")
        suffix = f" ({detail})" if detail else ""
        console.print(
            f"[bold]{short} turn {data.get('turn')} ended: {data.get('reason')}{suffix}[/bold]"
        )


__all__ = ["demo_command"]
