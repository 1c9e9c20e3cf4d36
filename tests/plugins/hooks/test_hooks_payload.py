"""The payload on stdin: Claude Code's field names, and tether's tools under Claude Code's tool
names and input fields (a hook that dumps its stdin to a file)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from hooks_support import compose, dump_hook, group, payloads, py_hook

from tether._signals import AbortSignal
from tether.plugins.hooks._payload import claude_tool_input
from tether.session.persistence._jsonl import JsonlPersistence
from tether.tools._pipeline import TOOLS_SERVICE


def calls(*items: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"name": n, "arguments": a} for n, a in items]}


async def test_pre_tool_use_payload_uses_claude_code_names(tmp_path: Path) -> None:
    out = tmp_path / "stdin.jsonl"
    rig = compose(
        tmp_path,
        {"PreToolUse": [group(dump_hook(tmp_path, "dump.py", out))]},
        [
            calls(
                ("bash", {"command": "ls -la", "timeout": 5, "description": "list"}),
                ("write", {"path": "a.txt", "content": "hi"}),
                (
                    "edit",
                    {
                        "path": "/abs/x.py",
                        "old_string": "a",
                        "new_string": "b",
                        "replace_all": True,
                    },
                ),
                ("read", {"path": "../outside.txt"}),
                ("ls", {}),
                ("glob", {"pattern": "**/*.py", "path": "src"}),
                ("grep", {"pattern": "TODO", "ignore_case": True, "glob": "*.py"}),
                ("custom", {"x": 1}),
            )
        ],
    )
    await rig.agent.run("go")
    ws = os.path.realpath(rig.workspace)
    raw = out.read_text()
    assert raw.endswith("\n")
    seen = payloads(out)
    call_ids = [e.data["call_id"] for e in rig.events("tool/call")]
    common = {
        "session_id": rig.session.id,
        "transcript_path": None,
        "cwd": str(rig.workspace),
        "hook_event_name": "PreToolUse",
    }
    expected = [
        ("Bash", {"command": "ls -la", "timeout": 5, "description": "list"}),
        ("Write", {"file_path": f"{ws}/a.txt", "content": "hi"}),
        (
            "Edit",
            {"file_path": "/abs/x.py", "old_string": "a", "new_string": "b", "replace_all": True},
        ),
        ("Read", {"file_path": f"{os.path.dirname(ws)}/outside.txt"}),
        ("LS", {"path": ws}),
        ("Glob", {"pattern": "**/*.py", "path": f"{ws}/src"}),
        ("Grep", {"pattern": "TODO", "-i": True, "glob": "*.py"}),
        ("custom", {"x": 1}),
    ]
    assert seen == [
        {**common, "tool_name": name, "tool_input": tool_input, "tool_use_id": call_id}
        for (name, tool_input), call_id in zip(expected, call_ids, strict=True)
    ]
    # Exactly these keys, in this order, one JSON line each.
    assert list(seen[0]) == [
        "session_id",
        "transcript_path",
        "cwd",
        "hook_event_name",
        "tool_name",
        "tool_input",
        "tool_use_id",
    ]
    assert len(raw.splitlines()) == len(expected)


async def test_matchers_see_claude_code_tool_names(tmp_path: Path) -> None:
    out = tmp_path / "stdin.jsonl"
    hook = dump_hook(tmp_path, "dump.py", out)
    rig = compose(
        tmp_path,
        {"PreToolUse": [group(hook, "Write|Edit")]},
        [calls(("bash", {"command": "ls"}), ("write", {"path": "a", "content": ""}))],
    )
    await rig.agent.run("go")
    assert [p["tool_name"] for p in payloads(out)] == ["Write"]


async def test_post_tool_use_payload_carries_the_tool_response(tmp_path: Path) -> None:
    out = tmp_path / "stdin.jsonl"
    rig = compose(
        tmp_path,
        {"PostToolUse": [group(dump_hook(tmp_path, "dump.py", out))]},
        [
            calls(
                ("write", {"path": "a.txt", "content": "hi"}),
                ("bash", {"command": "make"}),
                ("fail", {"x": 1}),
            )
        ],
    )
    await rig.agent.run("go")
    ws = os.path.realpath(rig.workspace)
    first, second = payloads(out)  # the failed tool runs no PostToolUse (Claude Code)
    assert first["hook_event_name"] == "PostToolUse"
    assert first["tool_name"] == "Write"
    assert first["tool_input"] == {"file_path": f"{ws}/a.txt", "content": "hi"}
    assert first["tool_response"] == {
        "content": "wrote a.txt",
        "is_error": False,
        "success": True,
        "filePath": f"{ws}/a.txt",
    }
    assert second["tool_response"] == {
        "content": "ran: make",
        "is_error": False,
        "success": True,
        "stdout": "ran: make",
        "stderr": "",
        "interrupted": False,
        "isImage": False,
        "exit_code": 0,
    }
    assert second["tool_use_id"] == rig.events("tool/call")[1].data["call_id"]


async def test_hook_runs_in_the_workspace_with_claude_project_dir(tmp_path: Path) -> None:
    out = tmp_path / "where.json"
    hook = py_hook(
        tmp_path,
        "where.py",
        f"open({str(out)!r}, 'w').write(json.dumps("
        "[os.getcwd(), os.environ.get('CLAUDE_PROJECT_DIR')]))\n",
    )
    rig = compose(
        tmp_path,
        {"PreToolUse": [group(hook)]},
        [calls(("write", {"path": "a.txt", "content": "hi"}))],
    )
    await rig.agent.run("go")
    ws = os.path.realpath(rig.workspace)
    assert json.loads(out.read_text()) == [ws, ws]


async def test_transcript_path_is_the_jsonl_log_when_there_is_one(tmp_path: Path) -> None:
    out = tmp_path / "stdin.jsonl"
    persistence = JsonlPersistence(tmp_path / "store")
    rig = compose(
        tmp_path,
        {"PreToolUse": [group(dump_hook(tmp_path, "dump.py", out))]},
        [calls(("write", {"path": "a.txt", "content": "hi"}))],
        persistence=persistence,
    )
    await rig.agent.run("go")
    await rig.store.close()
    (payload,) = payloads(out)
    assert payload["transcript_path"] == str(persistence.log_path(rig.session.id))


async def test_an_agentless_call_still_runs_its_hooks(tmp_path: Path) -> None:
    out = tmp_path / "stdin.jsonl"
    rig = compose(tmp_path, {"PreToolUse": [group(dump_hook(tmp_path, "dump.py", out))]})
    tools = rig.kernel.ctx.get(TOOLS_SERVICE)
    result = await tools.execute(None, "c1", "bash", '{"command": "ls"}', AbortSignal())
    assert result.content == "ran: ls"
    (payload,) = payloads(out)
    assert payload["session_id"] is None
    assert payload["tool_use_id"] == "c1"


def test_tool_input_mapping_edge_cases() -> None:
    assert claude_tool_input("bash", {"command": "x", "timeout_seconds": 2.5}, "/w") == {
        "command": "x",
        "timeout": 2500,
    }
    assert claude_tool_input("write", {"path": "a/../../b", "content": ""}, "/w/p") == {
        "file_path": "/w/b",
        "content": "",
    }
    assert claude_tool_input("ls", {"path": "."}, "/w") == {"path": "/w"}
    assert claude_tool_input("mcp__x__y", {"path": "rel"}, "/w") == {"path": "rel"}
