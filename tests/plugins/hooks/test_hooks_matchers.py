"""Matchers name a tool by its Claude Code name or tether's own; a tool matcher that can match
nothing is reported at load; matchers on events without one are ignored."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hooks_support import compose, dump_hook, group, normalized, payloads

from tether.kernel._plugin import Kernel
from tether.plugins.hooks import plugin
from tether.plugins.hooks._matchers_check import unknown_tool_matchers
from tether.plugins.hooks._settings import parse_settings_file

BASH_CALL = {"tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}]}
KNOWN = "Bash, Edit, Glob, Grep, LS, Read, Write, bash, edit, glob, grep, ls, read, write"


async def test_the_claude_code_name_and_the_tether_name_both_fire(tmp_path: Path) -> None:
    claude, own = tmp_path / "claude.jsonl", tmp_path / "own.jsonl"
    rig = compose(
        tmp_path,
        {
            "PreToolUse": [
                group(dump_hook(tmp_path, "claude.py", claude), "Bash"),
                group(dump_hook(tmp_path, "own.py", own), "bash"),
            ]
        },
        [BASH_CALL, {"text": "done"}],
    )
    await rig.agent.run("list")
    assert rig.events("tool/result")[0].data["content"] == "ran: ls"
    types = rig.layout()
    start = types.index("tool/call")
    assert types[start : types.index("tool/result") + 1] == [
        "tool/call",
        "hook/invoked",
        "hook/result",
        "hook/invoked",
        "hook/result",
        "tool/result",
    ]
    assert [normalized(e) for e in rig.events("hook/invoked")] == [
        {
            "turn": 1,
            "point": "PreToolUse",
            "dialect": "claude-code",
            "matcher": matcher,
            "handler_id": f"tether.toml#PreToolUse[{i}].hooks[0]",
        }
        for i, matcher in enumerate(("Bash", "bash"))
    ]
    # Either way the script sees Claude Code's name and input.
    for out in (claude, own):
        assert [(p["tool_name"], p["tool_input"]) for p in payloads(out)] == [
            ("Bash", {"command": "ls"})
        ]


async def test_a_regex_matcher_may_match_either_name(tmp_path: Path) -> None:
    out = tmp_path / "pre.jsonl"
    rig = compose(
        tmp_path,
        {"PreToolUse": [group(dump_hook(tmp_path, "pre.py", out), "^(write|edit)$")]},
        [{"tool_calls": [{"name": "write", "arguments": {"path": "a", "content": "x"}}]}],
    )
    await rig.agent.run("write")
    assert [p["tool_name"] for p in payloads(out)] == ["Write"]


def test_a_tool_matcher_that_matches_no_tool_is_a_warning_at_load(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kernel = Kernel()
    hooks = {
        "PreToolUse": [
            group("a", "Task|NotebookEdit"),
            group("b", "Bash"),
            group("c", "mcp__lab__.*"),
            group("d", "*"),
        ],
        "PostToolUse": [{"matcher": "Rm", "hooks": [{"type": "command", "command": "e"}] * 2}],
        "SessionStart": [group("f", "nothing-here")],
    }
    with caplog.at_level(logging.WARNING, logger="tether.plugins.hooks._matchers_check"):
        kernel.load(plugin, {"hooks": hooks})
    assert [r.getMessage() for r in caplog.records] == [
        "hooks: tether.toml#PreToolUse[0]: matcher 'Task|NotebookEdit' matches no tool tether "
        f"has ({KNOWN}); its hooks never run",
        f"hooks: tether.toml#PostToolUse[0]: matcher 'Rm' matches no tool tether has ({KNOWN}); "
        "its hooks never run",
    ]


def test_tools_registered_before_the_load_count_as_known() -> None:
    handlers = parse_settings_file(
        b'{"hooks": {"PreToolUse": [{"matcher": "deploy", "hooks": '
        b'[{"type": "command", "command": "x"}]}]}}',
        ".claude/settings.json",
    )
    assert unknown_tool_matchers(handlers, ["deploy"]) == []
    assert len(unknown_tool_matchers(handlers, [])) == 1


async def test_a_matcher_on_an_event_without_one_is_ignored(tmp_path: Path) -> None:
    # "[" is no valid regex: on UserPromptSubmit Claude Code ignores it, so the load must not
    # fail, and the hook runs for every prompt.
    out = tmp_path / "prompt.jsonl"
    hook = dump_hook(tmp_path, "_prompt.py", out)
    rig = compose(tmp_path, {"UserPromptSubmit": [group(hook, "[")]})
    await rig.agent.run("hello")
    assert [p["prompt"] for p in payloads(out)] == ["hello"]
    assert [normalized(e) for e in rig.events("hook/invoked")] == [
        {
            "turn": 1,
            "point": "UserPromptSubmit",
            "dialect": "claude-code",
            "handler_id": "tether.toml#UserPromptSubmit[0].hooks[0]",
        }
    ]
    (handler,) = parse_settings_file(
        b'{"hooks": {"Stop": [{"matcher": 7, "hooks": [{"type": "command", "command": "s"}]}]}}',
        ".claude/settings.json",
    )
    assert handler.matcher.matches_all
