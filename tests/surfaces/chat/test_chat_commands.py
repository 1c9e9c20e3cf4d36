"""Slash commands: /permission, /agents, /approvals, /compact, /resume, /help, unknown ones."""

from __future__ import annotations

from pathlib import Path

from chat_support import call, events_of, open_chat, root_steps, stored_events

from tether.policy._approval import policy_change_notice
from tether.policy._modes import ApprovalPolicy
from tether.session import SessionMeta, SessionStore
from tether.session.persistence import open_persistence


async def test_help_lists_every_command(tmp_path: Path) -> None:
    async with open_chat(tmp_path, [root_steps({"text": "hi"})]) as chat:
        shown = await chat.command("/help", "r or Enter rejects.\n")
        await chat.quit()
    assert shown.splitlines() == [
        "/permission [PRESET]  show the session's permission preset, or switch to PRESET",
        "/grants [revoke ID]   the grants and permission rules in force, or revoke a grant",
        "/agents               the lineage tree: every subagent of this session and its "
        "recorded scope",
        "/approvals            approvals waiting for an answer (this chat and the whole store)",
        "/compact              summarise the conversation so far, to free the model's context "
        "window",
        "/resume ID            switch to a stored session (an id or a unique prefix)",
        "/help                 this list",
        "/quit                 leave (also Ctrl-D)",
        "Ctrl-C cancels a running turn (the session goes on); twice within 2s, or at an empty "
        "prompt, quits. When an approval is asked: a allows once, s for the session and w "
        "always (where offered; then the scope's number, Enter for the narrowest), r or Enter "
        "rejects.",
    ]


async def test_an_unknown_command_is_named(tmp_path: Path) -> None:
    async with open_chat(tmp_path, [root_steps({"text": "hi"})]) as chat:
        shown = await chat.command("/frobnicate now", "commands\n")
        await chat.quit()
    assert shown == "unknown command /frobnicate; /help lists the commands\n"


async def test_permission_switch_is_recorded_and_widens_the_next_turn(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    agents = [
        root_steps(
            {"tool_calls": [call("write", path="../outside.txt", content="x")]},
            {"text": "Denied.", "expect": "sandbox: file access denied"},
            {"tool_calls": [call("write", path="../outside.txt", content="x")]},
            {"text": "Written.", "expect": "Wrote"},
        )
    ]
    async with open_chat(tmp_path, agents, plugins=()) as chat:
        root = chat.app.root
        first = await chat.turn("write outside")
        assert "[sandbox: file access denied under workspace-write mode]" in first
        assert not outside.exists()
        shown = await chat.command("/permission", "#presets).\n")
        assert shown.splitlines() == [
            "permission preset: workspace-write (sandbox workspace-write, approval ask)",
            "presets (/permission NAME switches to one):",
            "  * workspace-write     sandbox workspace-write, approval ask: edit the workspace "
            "and run commands there; ask for anything wider",
            "    read-only           sandbox read-only, approval ask: read anything, change "
            "nothing; ask for anything wider",
            "    plan                sandbox read-only, approval ask: read-only, and the model "
            "plans the task instead of doing it",
            "    danger-full-access  sandbox danger-full-access, approval never: no sandbox and "
            "no questions",
            "Codex: Read Only = read-only, Auto = workspace-write, Full Access = "
            "danger-full-access. Claude Code: acceptEdits = workspace-write (default: with the "
            "ask_tools plugin), plan = plan, bypassPermissions = danger-full-access "
            "(docs/guide-permissions.md#presets).",
        ]
        before = len(root.session)
        shown = await chat.command("/permission danger-full-access", "delegation.\n")
        assert shown.splitlines() == [
            "permission preset → danger-full-access (sandbox danger-full-access, approval never)",
            "Recorded in the session log; the agent is told at its next step. Children keep the "
            "scope fixed at their delegation.",
        ]
        assert events_of(chat.harness, root.id)[before:] == [
            ("permission/preset", {"preset": "danger-full-access"}),
            ("sandbox/mode", {"mode": "danger-full-access"}),
            ("approval/policy", {"policy": "never"}),
            ("agent/inbox/spliced", {"target": "inject", "start": 0, "inserted": 1}),
        ]
        again = await chat.command("/permission danger-full-access", "\n")
        assert again == (
            "permission preset is already danger-full-access "
            "(sandbox danger-full-access, approval never)\n"
        )
        bad = await chat.command("/permission bogus", "\n")
        assert bad == (
            "/permission: unknown permission preset 'bogus' "
            "(presets: workspace-write, read-only, plan, danger-full-access)\n"
        )
        second = await chat.turn("write outside again")
        assert "  → Wrote 1 byte to ../outside.txt" in second
        notices = [
            data
            for kind, data in events_of(chat.harness, root.id)[before:]
            if kind == "user/message" and data["source"].get("plugin") == "approval"
        ]
        toolbar = chat.app._toolbar()
        await chat.quit()
    assert notices == [
        {
            "content": policy_change_notice(ApprovalPolicy.ASK, ApprovalPolicy.NEVER),
            "source": {"kind": "plugin", "plugin": "approval"},
        }
    ]
    assert outside.read_text() == "x"
    assert toolbar == (f"session {root.id[:8]} · preset danger-full-access · /help · Ctrl-D quits")


async def test_agents_prints_the_lineage_tree(tmp_path: Path) -> None:
    agents = [
        root_steps(
            {"tool_calls": [call("subagent", description="alpha", prompt="Say hi.")]},
            {"text": "Started.", "expect": "started subagent"},
            {"text": "Done.", "expect": "Background subagent"},
        ),
        {"match": {"depth": 1}, "steps": [{"text": "hi from alpha"}]},
    ]
    async with open_chat(tmp_path, agents, plugins=()) as chat:
        root = chat.app.root.id
        empty = await chat.command("/agents", "(no subagents yet)\n")
        await chat.turn("delegate")
        persistence = chat.harness.store.persistence
        assert persistence is not None
        child = next(h.id for h in await persistence.list() if h.id != root)
        tree = await chat.command("/agents", "completed\n")
        tree += await chat.wait_for("completed\n")
        await chat.quit()
    assert empty.splitlines() == [
        f"{root}  root  depth 0  mode workspace-write  approval ask  new",
        "(no subagents yet)",
    ]
    assert tree.splitlines() == [
        f"{root}  root  depth 0  mode workspace-write  approval ask  completed",
        f"└── {child} [alpha]  continuable  depth 1  mode workspace-write (delegation)  "
        "approval never (delegation)  completed",
    ]


async def test_approvals_lists_nothing_when_nothing_waits(tmp_path: Path) -> None:
    async with open_chat(tmp_path, [root_steps({"text": "hi"})]) as chat:
        shown = await chat.command("/approvals", "\n")
        await chat.quit()
    assert shown == "no pending approvals\n"


async def test_approvals_ends_each_row_with_what_the_ask_would_run(tmp_path: Path) -> None:
    """F4: a stored pending escalation shows its mode and its command, in full, escaped."""
    command = "rm -rf ~\x1b[2K\r" + "y" * 300
    store = SessionStore(open_persistence(f"sqlite:///{tmp_path / 'tether.db'}"))
    session = store.create("crashed-1", meta=SessionMeta(cwd=str(tmp_path)))
    session.append("turn/start", {"turn": 0})
    session.append(
        "approval/asked",
        {
            "id": "ap-1",
            "tool_name": "bash",
            "reason": "escalate sandbox to danger-full-access: tidy\x1b]0;t\x07",
            "action": {"tool": "bash", "command": command, "target_mode": "danger-full-access"},
        },
    )
    await store.close()  # flushed: another process's pending ask, as the chat finds it
    async with open_chat(tmp_path, [root_steps({"text": "hi"})]) as chat:
        shown = await chat.command("/approvals", "allow-always|reject\n")
        await chat.quit()
    heading, row, hint = shown.splitlines()
    assert heading.split() == ["ID", "LINEAGE", "TOOL", "AGE", "HEADLINE", "ACTION"]
    assert row.startswith("ap-1  crashed-  bash  ")  # the lineage shows 8-character ids
    assert row.endswith(
        "escalate sandbox to danger-full-access: tidy\\x1b]0;t\\x07  "
        "escalate to danger-full-access · Command: rm -rf ~\\x1b[2K\\r" + "y" * 300
    )
    assert (
        hint
        == "Answer one from any terminal: tether approvals answer ID allow|allow-session|allow-always|reject"
    )


async def test_resume_switches_to_a_stored_session(tmp_path: Path) -> None:
    agents = [root_steps({"text": "first reply"}, {"text": "second reply"})]
    async with open_chat(tmp_path, agents) as chat:
        first = chat.app.root.id
        await chat.turn("hello")
        await chat.quit()
    async with open_chat(tmp_path, agents) as chat:
        fresh = chat.app.root.id
        missing = await chat.command("/resume nope", "\n")
        usage = await chat.command("/resume", "\n")
        shown = await chat.command(f"/resume {first[:8]}", "first reply\n")
        assert chat.app.root.id == first
        reply = await chat.turn("again")
        back = await chat.command(f"/resume {fresh}", "\n")
        await chat.quit()
    assert missing == "/resume: session 'nope' not found\n"
    assert usage == "/resume: usage: /resume ID\n"
    heading, *conversation = shown.splitlines()
    assert heading.startswith(f"resumed session {first} (")
    assert heading.endswith(" events, preset workspace-write)")
    assert conversation == ["> hello", "first reply"]  # the conversation so far, condensed
    assert reply.splitlines()[0] == "second reply"
    assert back.startswith(f"resumed session {fresh} (")


async def test_resume_option_opens_the_stored_session(tmp_path: Path) -> None:
    agents = [root_steps({"text": "first reply"}, {"text": "second reply"})]
    async with open_chat(tmp_path, agents) as chat:
        first = chat.app.root.id
        await chat.turn("hello")
        await chat.quit()
    async with open_chat(tmp_path, agents, resume=first) as chat:
        opening = chat.transcript.splitlines()
        reply = await chat.turn("again")
        await chat.quit()
    assert opening[0] == f"tether chat · resumed session {first}"
    # the conversation so far, condensed: each prompt typed and the agent's reply to it
    assert opening[2:4] == ["> hello", "first reply"]
    assert reply.splitlines()[0] == "second reply"


async def test_compact_summarises_the_conversation_and_says_so(tmp_path: Path) -> None:
    agents = [
        root_steps(
            {"text": "Hello."},
            {"text": "The user said hi; the agent greeted them.", "expect": "^Summarise"},
            {"text": "Still here."},
        )
    ]
    async with open_chat(tmp_path, agents) as chat:
        root = chat.app.root
        await chat.turn("hi")
        before = len(root.session)
        shown = await chat.command("/compact", "are kept.\n")
        compacted = events_of(chat.harness, root.id)[before:]
        again = await chat.command("/compact", "\n")
        answer = await chat.turn("still there?")
        stored = await stored_events(chat.harness, root.id)
        await chat.quit()
    [(kind, data)] = compacted
    assert kind == "context/compacted"
    assert (data["trigger"], data["first_seq"], data["last_seq"], data["summary"]) == (
        "manual",
        next(i for i, (k, d) in enumerate(stored) if k == "user/message" and d["content"] == "hi"),
        before - 1,
        "The user said hi; the agent greeted them.",
    )
    assert shown.splitlines() == [
        f"compacted events {data['first_seq']}-{before - 1} into a summary: about "
        f"{data['tokens_before']} → {data['tokens_after']} tokens",
        "Recorded in the session log; the permissions and project instructions are kept.",
    ]
    assert again == (
        "/compact: there is nothing older to summarise: everything since the last "
        "compaction is kept as it is (the project instructions, the latest runtime context, "
        "the current step)\n"
    )
    assert "Still here." in answer
    assert ("context/compacted", data) in stored


async def test_grants_lists_what_was_granted_and_revoke_ends_it(tmp_path: Path) -> None:
    agents = [
        root_steps(
            {"tool_calls": [call("write", path="t.txt", content="1")]},
            {"text": "one"},
            {"tool_calls": [call("write", path="t.txt", content="2")]},
            {"text": "two"},
            {"tool_calls": [call("write", path="t.txt", content="3")]},
            {"text": "three"},
        )
    ]
    async with open_chat(tmp_path, agents) as chat:
        root = chat.app.root
        chat.type("first\r")
        await chat.wait_for("Reject (default) > ")
        chat.type("s1")
        await chat.turn_end()
        await chat.turn("second")  # decided by the grant: no question
        grant = next(d for t, d in events_of(chat.harness, root.id) if t == "approval/grant")
        shown = await chat.command("/grants", "ends a grant.\n")
        lines = shown.splitlines()
        assert lines[0].split() == [
            "ID",
            "KIND",
            "DECISION",
            "RULE",
            "ESCALATE",
            "FROM",
            "SINCE",
            "BY",
        ]
        assert lines[1].split()[:5] == [grant["id"], "session", "allow", "Write(./t.txt)", root.id]
        revoked = await chat.command(f"/grants revoke {grant['id'][:8]}", "Write(./t.txt)\n")
        assert revoked == f"revoked session grant {grant['id']}: Write(./t.txt)\n"
        revoke_event = events_of(chat.harness, root.id)[-1]
        assert revoke_event[0] == "approval/grant-revoked"
        assert revoke_event[1]["by"].startswith("/grants in tether chat")
        missing = await chat.command("/grants revoke nope", "lists them\n")
        assert missing.startswith("/grants: grant 'nope' is not a grant in force")
        chat.type("third\r")
        await chat.wait_for("Reject (default) > ")  # asked again
        chat.type("r")
        await chat.turn_end()
        decided = [d for t, d in events_of(chat.harness, root.id) if t == "approval/decided"]
        await chat.quit()
    assert [(d["outcome"], d.get("decided_by")) for d in decided] == [
        ("allowed-for-session", None),
        ("allowed-once", "grant"),
        ("rejected", None),
    ]
