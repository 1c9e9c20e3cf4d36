"""The Codex hook dialect: ``._codex/hooks.json`` and ``._codex/config.toml`` handlers run by the
same runner, recorded with ``dialect: "codex"``, read with Codex's stricter reply rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hooks_support import (
    Rig,
    compose,
    normalized,
    payloads,
    py_hook,
    script,
    trusted_files,
)

from cli_support import run_args, tether
from tether.kernel import WORKSPACE_FILES
from tether.kernel._plugin import Kernel
from tether.plugins.hooks import HookEvent, HookReply
from tether.plugins.hooks._codex import interpret_codex, parse_codex_file
from tether.plugins.hooks._runner import CommandRun
from tether.plugins.hooks._settings import HookSettingsError

pytestmark = pytest.mark.timeout(120)

BASH_CALL = {"tool_calls": [{"name": "bash", "arguments": {"command": "rm -rf build"}}]}
PRE_ID = ".codex/hooks.json#PreToolUse[0].hooks[0]"


def codex_rig(
    tmp_path: Path, file: str, content: str, steps: list[dict[str, Any]], **kw: Any
) -> Rig:
    """A composition whose hooks come from one Codex file in the workspace, trusted once."""
    workspace = tmp_path / "ws"
    (workspace / ".codex").mkdir(parents=True, exist_ok=True)
    (workspace / file).write_text(content)
    config = {"codex_files": [file]}

    def provide(kernel: Kernel) -> None:
        kernel.ctx.provide(WORKSPACE_FILES, trusted_files(str(workspace), config))

    return compose(tmp_path, steps=steps, config=config, before_hooks=provide, **kw)


def hooks_json(event: str, command: str, matcher: str | None = None) -> str:
    group: dict[str, Any] = {"hooks": [{"type": "command", "command": command, "timeout": 30}]}
    if matcher is not None:
        group["matcher"] = matcher
    return json.dumps({"hooks": {event: [group]}})


def pre_hook(tmp_path: Path, out: Path, reply: dict[str, Any]) -> str:
    """A Codex PreToolUse hook that keeps its stdin in ``out`` and prints ``reply``."""
    return py_hook(
        tmp_path,
        "pre.py",
        f"open({str(out)!r}, 'a').write(sys.stdin.read())\nprint(json.dumps({reply!r}))\n",
    )


def slice_of(rig: Rig, first: str, last: str) -> list[str]:
    types = rig.layout()
    start = types.index(first)
    return types[start : types.index(last, start) + 1]


async def test_codex_pretool_deny(tmp_path: Path) -> None:
    out = tmp_path / "pre.jsonl"
    reply = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "no rm -rf here",
        }
    }
    rig = codex_rig(
        tmp_path,
        ".codex/hooks.json",
        hooks_json("PreToolUse", pre_hook(tmp_path, out, reply), "Bash"),
        [BASH_CALL, {"text": "ok", "expect": "no rm -rf"}],
    )
    await rig.agent.run("clean up")
    result = rig.events("tool/result")[0].data
    assert (result["content"], result["is_error"]) == ("Error: no rm -rf here", True)
    assert slice_of(rig, "tool/call", "tool/result") == [
        "tool/call",
        "hook/invoked",
        "hook/result",
        "tool/result",
    ]
    invoked, done = (normalized(e) for e in rig.events("hook/invoked", "hook/result"))
    assert invoked == {
        "turn": 1,
        "point": "PreToolUse",
        "dialect": "codex",
        "matcher": "Bash",
        "handler_id": PRE_ID,
    }
    assert done == {
        "turn": 1,
        "point": "PreToolUse",
        "handler_id": PRE_ID,
        "decision": "deny",
        "exit_code": 0,
        "duration_ms": "<ms>",
    }
    call_id = rig.events("tool/call")[0].data["call_id"]
    assert payloads(out) == [
        {
            "session_id": rig.session.id,
            "transcript_path": None,
            "cwd": str(rig.workspace),
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "rm -rf build"},
            "tool_use_id": call_id,
            "turn_id": "1",
            "permission_mode": "default",
        }
    ]


async def test_codex_pretool_ask_goes_to_the_approval_service(tmp_path: Path) -> None:
    # Codex itself rejects "ask" as unsupported and runs the call; tether asks instead.
    out = tmp_path / "pre.jsonl"
    reply = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "ask",
            "permissionDecisionReason": "deleting needs a human",
        }
    }
    rig = codex_rig(
        tmp_path,
        ".codex/hooks.json",
        hooks_json("PreToolUse", pre_hook(tmp_path, out, reply), "bash"),
        [BASH_CALL, {"text": "done", "expect": "rejected"}],
        answer="rejected",
    )
    await rig.agent.run("clean up")
    assert rig.events("tool/result")[0].data["content"] == 'Error: the user rejected tool "bash"'
    assert slice_of(rig, "tool/call", "tool/result") == [
        "tool/call",
        "hook/invoked",
        "hook/result",
        "approval/asked",
        "approval/decided",
        "tool/result",
    ]
    assert normalized(rig.events("hook/result")[0])["decision"] == "ask"
    assert normalized(rig.events("hook/invoked")[0])["dialect"] == "codex"
    assert [(r.tool_name, r.reason) for r in rig.asked] == [("bash", "deleting needs a human")]


async def test_codex_stop_block_continues_the_turn_from_config_toml(tmp_path: Path) -> None:
    out = tmp_path / "stop.jsonl"
    hook = py_hook(
        tmp_path,
        "stop.py",
        f"data = sys.stdin.read()\nopen({str(out)!r}, 'a').write(data)\n"
        "if not json.loads(data)['stop_hook_active']:\n"
        "    print(json.dumps({'decision': 'block', 'reason': 'run the tests too'}))\n",
    )
    toml = f'model = "o3"\n\n[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ntype = "command"\ncommand = "{hook}"\n'
    rig = codex_rig(
        tmp_path,
        ".codex/config.toml",
        toml,
        [{"text": "first"}, {"text": "second", "expect": "run the tests too"}],
    )
    await rig.agent.run("hi")
    await rig.hooks.settle()
    await rig.agent.when_idle()
    await rig.hooks.settle()
    assert [
        (p["hook_event_name"], p["stop_hook_active"], p["last_assistant_message"], p["turn_id"])
        for p in payloads(out)
    ] == [("Stop", False, "first", "1"), ("Stop", True, "second", "2")]
    assert [e.data for e in rig.events("turn/end")] == [
        {"turn": 1, "reason": "completed"},
        {"turn": 2, "reason": "completed"},
    ]
    continuation = [
        dict(e.data)
        for e in rig.events("user/message")
        if e.data.get("content") == "run the tests too"
    ]
    assert continuation == [
        {
            "content": "run the tests too",
            "source": {"kind": "plugin", "plugin": "hooks", "hook_event": "Stop"},
        }
    ]


async def test_codex_exit_2_without_a_reason_fails_closed(tmp_path: Path) -> None:
    hook = script(tmp_path, "quiet.sh", "#!/bin/sh\ncat >/dev/null\nexit 2\n")
    rig = codex_rig(
        tmp_path,
        ".codex/hooks.json",
        hooks_json("PreToolUse", hook),
        [BASH_CALL, {"text": "ok"}],
    )
    await rig.agent.run("clean up")
    assert rig.events("tool/result")[0].data["content"] == (
        f"Error: PreToolUse hook {PRE_ID} failed (PreToolUse hook exited with code 2 but wrote "
        "no reason to stderr); denied because hooks fail closed"
    )
    assert normalized(rig.events("hook/result")[0])["decision"] == "error"


# -- the reply rules ------------------------------------------------------------------------
PRE, STOP, POST = HookEvent.PRE_TOOL_USE, HookEvent.STOP, HookEvent.POST_TOOL_USE
UPS = HookEvent.USER_PROMPT_SUBMIT


def exited(code: int, stdout: str = "", stderr: str = "") -> CommandRun:
    return CommandRun("exited", code, stdout, stderr, 1)


def pre(specific: dict[str, Any]) -> HookReply:
    data = {"hookSpecificOutput": {"hookEventName": "PreToolUse", **specific}}
    return interpret_codex(PRE, exited(0, json.dumps(data)))


def test_codex_exit_2_blocks_with_stderr() -> None:
    assert interpret_codex(PRE, exited(2, "", " no\n")) == HookReply("block", "no")
    assert interpret_codex(STOP, exited(2, "", "again")) == HookReply("block", "again")


@pytest.mark.parametrize(
    ("specific", "decision"),
    [
        ({"permissionDecision": "deny", "permissionDecisionReason": "x"}, "deny"),
        ({"permissionDecision": "ask"}, "ask"),
        ({"permissionDecision": "allow"}, "allow"),
        ({"permissionDecision": "allow", "updatedInput": {"command": "ls"}}, "allow"),
        ({"permissionDecision": "deny"}, "invalid-output"),
        ({"permissionDecision": "deny", "permissionDecisionReason": "  "}, "invalid-output"),
        ({"permissionDecisionReason": "why"}, "invalid-output"),
        ({"permissionDecision": "ask", "updatedInput": {}}, "invalid-output"),
        ({"permissionDecision": "maybe"}, "invalid-output"),
        ({"additionalContext": "fyi"}, "none"),
    ],
)
def test_codex_permission_decisions(specific: dict[str, Any], decision: str) -> None:
    assert pre(specific).decision == decision


@pytest.mark.parametrize(
    ("reply", "event", "decision"),
    [
        ({"decision": "block", "reason": "no"}, PRE, "deny"),
        ({"decision": "block"}, PRE, "invalid-output"),
        ({"reason": "no"}, PRE, "invalid-output"),
        ({"continue": False}, PRE, "invalid-output"),
        ({"suppressOutput": True}, PRE, "invalid-output"),
        ({"decision": "approve"}, PRE, "allow"),
        ({"decision": "block"}, STOP, "invalid-output"),
        ({"decision": "block", "reason": "more"}, STOP, "block"),
        ({"decision": "block", "reason": "more", "continue": False}, STOP, "none"),
        ({"reason": "why"}, POST, "invalid-output"),
        ({"decision": "block", "reason": "bad output"}, POST, "block"),
        ([], STOP, "invalid-output"),
        ({"decision": "approve"}, STOP, "invalid-output"),
        ({"continue": False, "stopReason": "pause"}, UPS, "block"),
        ({"decision": "block", "reason": "no secrets"}, UPS, "block"),
    ],
)
def test_codex_json_replies(reply: object, event: HookEvent, decision: str) -> None:
    assert interpret_codex(event, exited(0, json.dumps(reply))).decision == decision


def test_codex_user_prompt_continue_false_rejects_with_its_stop_reason() -> None:
    reply = {"continue": False, "stopReason": " pause "}
    assert interpret_codex(UPS, exited(0, json.dumps(reply))) == HookReply(
        "block", "pause", halt=True
    )
    assert interpret_codex(UPS, exited(0, "plain context")) == HookReply(
        "none", contexts=("plain context",)
    )


def test_codex_files_parse_json_and_toml_and_ignore_what_tether_does_not_bridge() -> None:
    toml = b'[hooks]\n[[hooks.PreCompact]]\nhooks = [{type = "command", command = "x"}]\n'
    assert parse_codex_file(toml, ".codex/config.toml") == []
    data = json.dumps(
        {
            "hooks": {
                "PermissionRequest": [{"hooks": [{"type": "command", "command": "p"}]}],
                "UserPromptSubmit": [
                    {"matcher": "[", "hooks": [{"type": "command", "command": "u", "async": 1}]}
                ],
            }
        }
    ).encode()
    (handler,) = parse_codex_file(data, ".codex/hooks.json")
    assert (handler.event, handler.dialect, handler.command, handler.matcher.pattern) == (
        HookEvent.USER_PROMPT_SUBMIT,
        "codex",
        "u",
        None,
    )
    with pytest.raises(HookSettingsError, match=r"\.codex/config\.toml: not valid TOML"):
        parse_codex_file(b"[hooks", ".codex/config.toml")


# -- through the CLI, under workspace trust ---------------------------------------------------
def test_a_workspace_codex_file_runs_only_once_trusted(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / ".codex").mkdir(parents=True)
    guard = script(
        workspace / ".codex",
        "guard.sh",
        "#!/bin/sh\ncat >/dev/null\necho 'no deletions' >&2\nexit 2\n",
    )
    (workspace / ".codex" / "hooks.json").write_text(hooks_json("PreToolUse", f'"{guard}"', "Bash"))
    (workspace / "tether.toml").write_text(
        '[[plugins]]\nname = "hooks"\nconfig = { codex_files = [".codex/hooks.json"] }\n'
    )
    model = tmp_path / "script.json"
    model.write_text(json.dumps({"agents": [{"match": {}, "steps": [BASH_CALL, {"text": "ok"}]}]}))
    args = run_args(model, workspace, f"sqlite:///{tmp_path / 's.db'}", "--sandbox", "read-only")
    refused = tether(*args)
    assert refused.returncode == 1
    assert refused.stdout == ""
    assert refused.stderr.startswith(
        f"tether: WORKSPACE_UNTRUSTED: workspace {workspace} has configuration you have not "
        "trusted: tether.toml (new), .codex/hooks.json (new)."
    )
    assert tether("trust", "--workspace", str(workspace)).returncode == 0
    done = tether(*args)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    hooks = [line["data"] for line in lines if line["type"].startswith("hook/")]
    assert [h.get("dialect") for h in hooks] == ["codex", None]
    assert (hooks[1]["decision"], hooks[1]["stderr_summary"]) == ("block", "no deletions")
    (result,) = [line["data"] for line in lines if line["type"] == "tool/result"]
    assert result["content"] == "Error: no deletions"
