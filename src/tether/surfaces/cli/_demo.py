"""``tether demo``: the whole story offline, in under a minute, narrated.

A scripted root agent (``examples/demo/story.json``, shipped in the package too) in a
temporary workspace:

1. delegates to a foreground **reviewer** capped at read-only: its write is denied by the
   sandbox and its escalation is rejected by the ``never`` pin, with the audit pair in its log;
2. starts a background **builder**: its guarded ``bash`` call is routed to the root's answerer
   (the demo answers for you) and runs confined to the builder's mode;
3. the user widens the root to danger-full-access, then the root messages the settled builder:
   cold resume keeps the builder's recorded scope, so its write outside is still denied;
4. prints the lineage tree and where the logs are stored (the default store, or ``--store``),
   so ``tether sessions tree`` can show them again; the workspace is temporary.

``--json`` prints the event stream instead of the narration.
"""

from __future__ import annotations

import json
import tempfile
from importlib import resources
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from tether._harness import Harness, SessionEvent
from tether.agent._context_snapshot import is_snapshot
from tether.agent._events import AssistantMessage, ToolCalled, ToolResulted, UserMessage
from tether.kernel import PluginEntry
from tether.kernel._printable import printable, printable_block
from tether.policy._approval import ApprovalRequest
from tether.policy._events import ApprovalPolicySet, SandboxModeSet
from tether.policy._sandbox_policy import SANDBOX_POLICY_SERVICE
from tether.session._json import thaw
from tether.subagents._lineage import lineage_tree, render_tree
from tether.surfaces.cli._common import JsonOption, StoreOption, run, store_url
from tether.surfaces.cli.chat._render import knob_change

SCRIPT = "demo_story.json"
PLUGINS = [
    PluginEntry(
        name="subagents",
        config={
            "instances": [
                {"name": "subagent"},
                {"name": "reviewer", "background_mode": "one-shot", "sandbox": "read-only"},
            ]
        },
    ),
    PluginEntry(name="root_approvals", config={"guarded": ["bash"], "blocked_notice_seconds": 60}),
]


def demo_command(store: StoreOption = None, json_output: JsonOption = False) -> None:
    """Run the offline demo (no API key needed)."""
    if not run(_demo(json_output, store_url(store))):
        raise typer.Exit(1)


async def _demo(json_output: bool, store: str) -> bool:
    console = Console(highlight=False, soft_wrap=True)

    def say(text: str = "") -> None:
        if not json_output:
            console.print(text)

    with tempfile.TemporaryDirectory(prefix="tether-demo-") as tmp:
        base = Path(tmp)
        workspace = base / "workspace"
        workspace.mkdir()
        script = base / SCRIPT
        script.write_text(resources.files("tether.surfaces.cli").joinpath(SCRIPT).read_text())

        def answer(request: ApprovalRequest) -> str:
            say(
                f"[magenta]  ? the root's answerer (the demo, for you) allows: {request.reason}[/magenta]"
            )
            return "allowed-once"

        async with Harness.open(
            workspace=workspace,
            model=f"scripted:{script}",
            store=store,
            sandbox="workspace-write",
            approval="ask",
            approver=answer,
            plugins=PLUGINS,
        ) as harness:
            labels: dict[str, str] = {}

            def show(item: SessionEvent) -> None:
                if item.session_id not in labels:
                    agent = harness.agents.get(item.session_id)
                    if agent is not None:
                        labels[item.session_id] = agent.options.label or "root"
                if json_output:
                    typer.echo(_json_line(item))
                else:
                    _narrate(console, item, labels)

            say("[bold]tether demo[/bold]: a root agent delegates; every child keeps its scope.")
            say(f"workspace: {workspace}\n")
            say("[bold]1. Review (read-only reviewer) and build (background builder)[/bold]")
            async for item in harness.stream("Review the notes, then build the project."):
                show(item)
            root = harness.root
            assert root is not None
            say("\n[bold]2. The user widens the root session to danger-full-access[/bold]")
            sandbox = harness.ctx.require(SANDBOX_POLICY_SERVICE)
            widened = sandbox.set_sandbox_mode(root.session, "danger-full-access")
            if json_output:  # appended between runs, outside any stream: show it too
                show(SessionEvent(root.id, widened))
            say("   (a settled child keeps the scope recorded in its own log)\n")
            say("[bold]3. The root sends the settled builder more work (cold resume)[/bold]")
            async for item in harness.stream("Ask the builder to write outside the workspace."):
                show(item)
            outside = base / "outside.txt"
            ok = (
                root.last_result is not None
                and root.last_result.stop_reason == "completed"
                and not outside.exists()
                and not (workspace / "NOTES.md").exists()
                and (workspace / "build" / "build.log").exists()
            )
            assert harness.store.persistence is not None
            tree = await lineage_tree(harness.store.persistence, root.id)
            if not json_output:
                say("\n[bold]Lineage[/bold]")
                for line in render_tree(tree):
                    say("  " + escape(line))
                say(
                    f"\nNOTES.md written by the read-only reviewer: {(workspace / 'NOTES.md').exists()}"
                )
                say(
                    "build/build.log written by the builder's confined command: "
                    f"{(workspace / 'build' / 'build.log').exists()}"
                )
                say(f"file outside the workspace created: {outside.exists()}")
                say(f"the logs are stored in {store}; look again with:")
                say(f"  tether sessions tree {root.id} --store {store}")
                say(
                    "[green]demo completed[/green]"
                    if ok
                    else "[red]demo did not go as scripted[/red]"
                )
            return ok


def _json_line(item: SessionEvent) -> str:
    event = item.event
    return json.dumps(
        {"session": item.session_id, "seq": event.seq, "type": event.type, "data": thaw(event.data)}
    )


def _narrate(console: Console, item: SessionEvent, labels: dict[str, str]) -> None:
    event, data = item.event, item.event.data
    who = labels.get(item.session_id, item.session_id[:8])
    indent = "" if who == "root" else "    "
    if event.type == UserMessage.TYPE:
        if is_snapshot(event):
            return
        console.print(f"{indent}[cyan]{who} ← {_short(UserMessage.parse(data).content)}[/cyan]")
    elif event.type == AssistantMessage.TYPE and (reply := AssistantMessage.parse(data)).content:
        content = escape(printable_block(reply.content))
        console.print(f"{indent}[green]{who}: {content}[/green]")
    elif event.type == ToolCalled.TYPE:
        call = ToolCalled.parse(data)
        console.print(
            f"{indent}[yellow]{who} calls {_short(call.name)}[/yellow] {_short(call.arguments)}"
        )
    elif event.type == ToolResulted.TYPE:
        result = ToolResulted.parse(data)
        style = "red" if result.is_error else "dim"
        console.print(f"{indent}[{style}]  → {_short(result.content)}[/{style}]")
    elif event.type in ("approval/asked", "approval/decided", "approval/pending"):
        console.print(
            f"{indent}[magenta]{who} {event.type} {escape(json.dumps(thaw(data)))}[/magenta]"
        )
    elif event.type in (SandboxModeSet.TYPE, ApprovalPolicySet.TYPE):
        _, value, source = knob_change(event.type, data)
        if source is not None:
            console.print(
                f"{indent}[blue]{who} scope: {event.type} {value} (source {source})[/blue]"
            )


def _short(value: object, limit: int = 160) -> str:
    """One escaped line: no rich markup (tool results hold ``[sandbox: ...]``, which rich would
    eat) and no terminal control."""
    text = printable(" ".join(str(value).split()))
    return escape(text if len(text) <= limit else text[: limit - 1] + "…")
