"""Slash commands typed at the ``tether chat`` prompt (between turns).

``/permission [PRESET]``, ``/grants [revoke ID]``, ``/agents``, ``/approvals``, ``/compact``,
``/resume ID``, ``/help`` and ``/quit``.
Each prints what it did; a failure prints one red line and the chat goes on.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from rich.console import Console
from rich.text import Text

from tether._harness import Harness
from tether.agent import Agent
from tether.agent._events import ContextCompacted
from tether.errors import TetherError
from tether.kernel._printable import printable
from tether.plugins._headline import action_text
from tether.policy._approval import APPROVAL_SERVICE, AskedAction
from tether.policy._presets import PERMISSION_PRESETS_SERVICE, PermissionPresetsService
from tether.session._answer_channel import answer_words
from tether.session._pending_approvals import pending_approvals
from tether.subagents._lineage import lineage_tree, render_tree
from tether.surfaces.cli._common import table
from tether.surfaces.cli._grants import HEADINGS, held_row, rule_row
from tether.surfaces.cli._id_prefix import resolve_session_id
from tether.surfaces.cli.chat._prompts import chat_answerer
from tether.surfaces.cli.chat._replay import replay

HELP: Final = (
    ("/permission [PRESET]", "show the session's permission preset, or switch to PRESET"),
    ("/grants [revoke ID]", "the grants and permission rules in force, or revoke a grant"),
    ("/agents", "the lineage tree: every subagent of this session and its recorded scope"),
    ("/approvals", "approvals waiting for an answer (this chat and the whole store)"),
    ("/compact", "summarise the conversation so far, to free the model's context window"),
    ("/resume ID", "switch to a stored session (an id or a unique prefix)"),
    ("/help", "this list"),
    ("/quit", "leave (also Ctrl-D)"),
)
KEYS_HELP: Final = (
    "Ctrl-C cancels a running turn (the session goes on); twice within 2s, or at an empty "
    "prompt, quits. When an approval is asked: a allows once, s for the session and w always "
    "(where offered; then the scope's number, Enter for the narrowest), r or Enter rejects."
)


PRESET_MAPPING: Final = (
    "Codex: Read Only = read-only, Auto = workspace-write, Full Access = danger-full-access. "
    "Claude Code: acceptEdits = workspace-write (default: with the ask_tools plugin), plan = "
    "plan, bypassPermissions = danger-full-access (docs/guide-permissions.md#presets)."
)


class CommandError(TetherError):
    code = "CHAT_COMMAND"


@dataclass
class CommandHost:
    """What commands may touch: the harness, the console, the current root and quitting."""

    harness: Harness
    console: Console
    root: Callable[[], Agent]
    switch_root: Callable[[Agent], None]
    quit: Callable[[], None]


Handler = Callable[[CommandHost, str], Awaitable[None]]


async def _help(host: CommandHost, _arg: str) -> None:
    width = max(len(name) for name, _ in HELP)
    for name, what in HELP:
        host.console.print(Text.assemble((name.ljust(width), "bold"), "  ", what))
    host.console.print(Text(KEYS_HELP, style="dim"))


def _describe_preset(service: PermissionPresetsService, name: str) -> str:
    row = service.table.get(name)
    if row is None:
        return name
    return f"{name} (sandbox {row.sandbox.value}, approval {row.approval.value})"


async def _permission(host: CommandHost, arg: str) -> None:
    service = host.harness.ctx.get(PERMISSION_PRESETS_SERVICE)
    if service is None:
        raise CommandError("permission presets are not composed in this harness")
    root = host.root()
    if not arg:
        current = service.current(root.session)
        host.console.print(Text(f"permission preset: {_describe_preset(service, current)}"))
        host.console.print(Text("presets (/permission NAME switches to one):", style="dim"))
        width = max(len(name) for name in service.table)
        for name, row in service.table.items():
            mark = "*" if name == current else " "
            knobs = f"sandbox {row.sandbox.value}, approval {row.approval.value}"
            summary = f": {row.summary}" if row.summary else ""
            host.console.print(Text(f"  {mark} {name.ljust(width)}  {knobs}{summary}", style="dim"))
        host.console.print(Text(PRESET_MAPPING, style="dim"))
        return
    name = arg.split()[0]
    if not service.set_preset(root, name):
        host.console.print(Text(f"permission preset is already {_describe_preset(service, name)}"))
        return
    await host.harness.store.flush(root.session)
    host.console.print(
        Text(f"permission preset → {_describe_preset(service, name)}", style="bold magenta")
    )
    host.console.print(
        Text(
            "Recorded in the session log; the agent is told at its next step. Children keep "
            "the scope fixed at their delegation.",
            style="dim",
        )
    )


async def _grants(host: CommandHost, arg: str) -> None:
    harness = host.harness
    words = arg.split()
    if words[:1] == ["revoke"]:
        if len(words) != 2:
            raise CommandError("usage: /grants revoke ID")
        revoked = await harness.revoke_grant(words[1], by=f"/grants in {chat_answerer()}")
        host.console.print(
            Text(
                f"revoked {revoked.kind} grant {revoked.id}: {printable(revoked.describe())}",
                style="bold magenta",
            )
        )
        return
    if words:
        raise CommandError("usage: /grants, or /grants revoke ID")
    rows = [held_row(g) for g in harness.grants()]
    rows += [rule_row(r) for r in harness.permission_rules.configured]
    if not rows:
        host.console.print(Text("no grants and no permission rules"))
        return
    host.console.print(Text(table(HEADINGS, [row.cells() for row in rows]).rstrip("\n")))
    host.console.print(
        Text(
            "Grants are answers' (s or w at a question); rules come from the files shown. "
            "/grants revoke ID ends a grant.",
            style="dim",
        )
    )


async def _agents(host: CommandHost, _arg: str) -> None:
    root = host.root()
    persistence = host.harness.store.persistence
    if persistence is None:
        raise CommandError("this harness has no session store to read the lineage from")
    for session in host.harness.store.live():
        await host.harness.store.flush(session)
    tree = await lineage_tree(persistence, root.id)
    lines = render_tree(tree)
    for line in lines:
        host.console.print(Text(printable(line)))
    if not tree.children:
        host.console.print(Text("(no subagents yet)", style="dim"))


async def _approvals(host: CommandHost, _arg: str) -> None:
    approval = host.harness.ctx.get(APPROVAL_SERVICE)
    live = approval.pending() if approval is not None else []
    now = time.monotonic()
    rows = [
        [
            p.id,
            " → ".join(s[:8] for s in p.lineage),
            printable(p.tool_name),
            f"{max(0.0, now - p.since):.0f}s",
            printable(p.headline),
            action_text(p.action or AskedAction(p.tool_name)) or "-",
        ]
        for p in live
    ]
    seen = {p.id for p in live}
    persistence = host.harness.store.persistence
    if persistence is not None:
        wall = time.time() * 1000
        for row in await pending_approvals(persistence):
            if row.id in seen:
                continue
            rows.append(
                [
                    row.id,
                    " → ".join(s[:8] for s in row.lineage),
                    printable(row.tool_name),
                    f"{max(0.0, wall - row.asked_at) / 1000:.0f}s",
                    printable(row.headline),
                    action_text(AskedAction.from_data(row.action, row.tool_name)) or "-",
                ]
            )
    if not rows:
        host.console.print(Text("no pending approvals"))
        return
    text = table(["ID", "LINEAGE", "TOOL", "AGE", "HEADLINE", "ACTION"], rows).rstrip("\n")
    host.console.print(Text(text))
    host.console.print(
        Text(
            f"Answer one from any terminal: tether approvals answer ID {answer_words()}",
            style="dim",
        )
    )


async def _compact(host: CommandHost, _arg: str) -> None:
    root = host.root()
    event = await root.compact()
    await host.harness.store.flush(root.session)
    compacted = ContextCompacted.from_data(event.data)
    host.console.print(
        Text(
            f"compacted events {compacted.first_seq}-{compacted.last_seq} into a summary: "
            f"about {compacted.tokens_before} → {compacted.tokens_after} tokens",
            style="bold",
        )
    )
    host.console.print(
        Text(
            "Recorded in the session log; the permissions and project instructions are kept.",
            style="dim",
        )
    )


async def _resume(host: CommandHost, arg: str) -> None:
    if not arg:
        raise CommandError("usage: /resume ID")
    session_id = await resolve_root_id(host.harness, arg.split()[0])
    if session_id == host.root().id:
        host.console.print(Text(f"already in session {session_id}"))
        return
    agent = await resume_root(host.harness, session_id)
    host.switch_root(agent)
    service = host.harness.ctx.get(PERMISSION_PRESETS_SERVICE)
    preset = f", preset {service.current(agent.session)}" if service is not None else ""
    host.console.print(
        Text(f"resumed session {agent.id} ({len(agent.session)} events{preset})", style="bold")
    )
    for line in replay(agent.session.events):
        host.console.print(line)


async def resolve_root_id(harness: Harness, wanted: str) -> str:
    """The stored session ``wanted`` names (an id, a unique prefix, or ``last``)."""
    persistence = harness.store.persistence
    if persistence is None:
        raise CommandError("this harness has no session store to resume from")
    return await resolve_session_id(persistence, wanted, workspace=harness.workspace)


async def resume_root(harness: Harness, wanted: str) -> Agent:
    """Cold-resume a stored top-level session as the chat's root (nothing is re-applied);
    ``wanted`` is an id, a unique prefix, or ``last``."""
    session_id = await resolve_root_id(harness, wanted)
    live = harness.agents.get(session_id)
    if live is not None and live.depth == 0:
        return live  # a root this chat already opened: switch back to it
    if harness.store.get(session_id) is not None:
        raise CommandError(f"session {session_id} is live in this chat as a subagent")
    stored = await harness.store.inspect(session_id)
    if stored.header.delegation_depth > 0:
        raise CommandError(
            f"session {session_id} is a subagent (depth {stored.header.delegation_depth}); "
            "it is resumed through its parent, which recomposes its tools and scope"
        )
    return await harness.resume(session_id)


async def _quit(host: CommandHost, _arg: str) -> None:
    host.quit()


COMMANDS: Final[dict[str, Handler]] = {
    "/help": _help,
    "/?": _help,
    "/permission": _permission,
    "/permissions": _permission,
    "/grants": _grants,
    "/agents": _agents,
    "/approvals": _approvals,
    "/compact": _compact,
    "/resume": _resume,
    "/quit": _quit,
    "/exit": _quit,
}


async def dispatch(host: CommandHost, line: str) -> None:
    """Run one slash command line; errors are printed, never raised."""
    name, _, arg = line.strip().partition(" ")
    handler = COMMANDS.get(name.lower())
    if handler is None:
        shown = printable(name)
        host.console.print(Text(f"unknown command {shown}; /help lists the commands", style="red"))
        return
    try:
        await handler(host, arg.strip())
    except TetherError as err:
        host.console.print(Text(f"{printable(name)}: {printable(str(err))}", style="red"))


__all__ = ["COMMANDS", "HELP", "CommandError", "CommandHost", "dispatch", "resume_root"]
