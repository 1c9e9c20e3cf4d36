"""Running one hook command (real subprocesses) and reading its reply."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hooks_support import PY, pid_alive, py_hook, script, wait_for_file

from tether._signals import AbortSignal
from tether.plugins.hooks import HookEvent, HookReply
from tether.plugins.hooks._protocol import interpret, merge
from tether.plugins.hooks._runner import CommandRun, hook_env, run_command

PRE = HookEvent.PRE_TOOL_USE
POST = HookEvent.POST_TOOL_USE
PROMPT = HookEvent.USER_PROMPT_SUBMIT


async def run(
    command: str, stdin: bytes = b"{}\n", *, timeout: float = 30, **kw: Any
) -> CommandRun:
    return await run_command(command, stdin, cwd=None, env=hook_env("/proj"), timeout=timeout, **kw)


def exited(code: int, stdout: str = "", stderr: str = "") -> CommandRun:
    return CommandRun("exited", code, stdout, stderr, 1)


# -- the runner ------------------------------------------------------------------------------
async def test_stdin_stdout_stderr_and_exit_code_round_trip(tmp_path: Path) -> None:
    cmd = py_hook(
        tmp_path,
        "echo.py",
        "data = sys.stdin.read()\nprint(data.upper(), end='')\n"
        "print('warn', file=sys.stderr)\nsys.exit(3)\n",
    )
    result = await run(cmd, b'{"a": 1}\n')
    assert (result.status, result.exit_code, result.stdout, result.stderr) == (
        "exited",
        3,
        '{"A": 1}\n',
        "warn\n",
    )


async def test_runs_through_sh_so_pipes_and_variables_work(tmp_path: Path) -> None:
    result = await run('read line; echo "$line" | tr a-z A-Z; echo "$CLAUDE_PROJECT_DIR"', b"hi\n")
    assert (result.exit_code, result.stdout) == (0, "HI\n/proj\n")


async def test_environment_is_scrubbed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-secret")
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("EXTRA_OK", "1")
    cmd = py_hook(tmp_path, "env.py", "print(json.dumps(dict(os.environ)))\n")
    env = hook_env("/proj", ["EXTRA_OK"])
    result = await run_command(cmd, b"", cwd=None, env=env, timeout=30)
    seen = json.loads(result.stdout)
    assert "DEEPSEEK_API_KEY" not in seen
    assert seen["CLAUDE_PROJECT_DIR"] == "/proj"
    assert seen["LANG"] == "C.UTF-8"
    assert seen["EXTRA_OK"] == "1"
    # What the shell itself adds (PWD, SHLVL, ...) aside, only the allowlist gets through.
    assert {"PATH", "LANG", "EXTRA_OK", "CLAUDE_PROJECT_DIR"} <= set(env)
    assert set(env) <= {"PATH", "HOME", "LANG", "TERM", "EXTRA_OK", "CLAUDE_PROJECT_DIR"}


async def test_a_hook_that_ignores_stdin_is_fine(tmp_path: Path) -> None:
    result = await run("exit 0", b"x" * (1 << 20))
    assert (result.status, result.exit_code) == ("exited", 0)


async def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    cmd = script(tmp_path, "hang.sh", f"#!/bin/sh\nsleep 300 &\necho $! > {pidfile}\nwait\n")
    result = await run(cmd, timeout=0.5)
    assert (result.status, result.exit_code) == ("timeout", None)
    child = int(pidfile.read_text())
    for _ in range(200):  # the kill is delivered; reaping by init may lag a moment
        if not pid_alive(child):
            break
        await asyncio.sleep(0.01)
    assert not pid_alive(child)


async def test_abort_signal_kills_the_command(tmp_path: Path) -> None:
    started = tmp_path / "started"
    cmd = script(tmp_path, "hang.sh", f"#!/bin/sh\ntouch {started}\nexec sleep 300\n")
    signal = AbortSignal()
    task = asyncio.ensure_future(run(cmd, signal=signal))
    await wait_for_file(started)
    signal.abort("user")
    result = await task
    assert (result.status, result.exit_code) == ("cancelled", None)


async def test_task_cancellation_kills_the_group_and_propagates(tmp_path: Path) -> None:
    started, pidfile = tmp_path / "started", tmp_path / "pid"
    cmd = script(
        tmp_path, "hang.sh", f"#!/bin/sh\necho $$ > {pidfile}\ntouch {started}\nexec sleep 300\n"
    )
    task = asyncio.ensure_future(run(cmd))
    await wait_for_file(started)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    pid = int(pidfile.read_text())
    for _ in range(200):
        if not pid_alive(pid):
            break
        await asyncio.sleep(0.01)
    assert not pid_alive(pid)


async def test_missing_interpreter_is_an_exit_status_not_an_exception(tmp_path: Path) -> None:
    cmd = script(tmp_path, "broken.py", "#!/nonexistent/python3\nprint('never')\n")
    result = await run(cmd)
    assert result.status == "exited"
    assert result.exit_code in (126, 127)
    assert interpret(PRE, result).decision == "error"


async def test_output_is_bounded(tmp_path: Path) -> None:
    cmd = f"{PY} -c \"import sys; sys.stdout.write('y' * 300000)\""
    result = await run_command(cmd, b"", cwd=None, env=hook_env("/p"), timeout=30, max_output=1000)
    assert (result.exit_code, result.stdout) == (0, "y" * 1000)


async def test_a_vanished_cwd_still_runs(tmp_path: Path) -> None:
    result = await run_command(
        "pwd", b"", cwd=str(tmp_path / "gone"), env=hook_env("/p"), timeout=30
    )
    assert (result.status, result.exit_code) == ("exited", 0)


async def test_pre_aborted_signal_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    signal = AbortSignal()
    signal.abort("user")
    result = await run(f"touch {marker}", signal=signal)
    assert result.status == "cancelled"
    assert not marker.exists()


# -- the reply protocol ----------------------------------------------------------------------
def reply(event: HookEvent, value: Any) -> HookReply:
    text = value if isinstance(value, str) else json.dumps(value)
    return interpret(event, exited(0, text))


def test_exit_2_blocks_with_stderr_as_reason() -> None:
    # Exit 2 is ``block`` on every event (on PreToolUse the bridge denies the call with it).
    assert interpret(PRE, exited(2, '{"decision": "approve"}', "  no rm -rf\n")) == HookReply(
        "block", "no rm -rf"
    )
    assert interpret(POST, exited(2, "", "lint failed")) == HookReply("block", "lint failed")
    assert interpret(PRE, exited(2)) == HookReply("block", "blocked by a PreToolUse hook")


def test_other_exit_codes_are_non_blocking_errors() -> None:
    assert interpret(PRE, exited(1, "", "boom")).decision == "error"
    assert interpret(PRE, CommandRun("timeout", None, "", "", 5)).decision == "timeout"
    assert interpret(PRE, CommandRun("spawn-failed", None, "", "", 0, "x")).decision == "error"


def test_permission_decision_overrides_legacy_decision() -> None:
    both = {
        "decision": "approve",
        "reason": "legacy",
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "new",
        },
    }
    assert reply(PRE, both) == HookReply("deny", "new")
    assert reply(PRE, {"decision": "block", "reason": "old"}) == HookReply("deny", "old")
    assert reply(PRE, {"decision": "approve"}) == HookReply("allow")
    ask = {"hookSpecificOutput": {"permissionDecision": "ask", "permissionDecisionReason": "sure?"}}
    assert reply(PRE, ask) == HookReply("ask", "sure?")
    assert reply(PRE, {"hookSpecificOutput": {"permissionDecision": "ask"}}) == HookReply("ask")


def test_plain_text_is_context_only_where_claude_code_says_so() -> None:
    assert reply(PROMPT, "remember the style guide\n") == HookReply(
        "none", contexts=("remember the style guide",)
    )
    assert reply(HookEvent.SESSION_START, "branch: main") == HookReply(
        "none", contexts=("branch: main",)
    )
    assert reply(PRE, "just chatter") == HookReply("none")
    assert reply(PRE, "") == HookReply("none")


def test_additional_context_and_block_on_other_events() -> None:
    out = {
        "decision": "block",
        "reason": "fix lint",
        "hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "ran eslint"},
    }
    assert reply(POST, out) == HookReply("block", "fix lint", ("ran eslint",))
    assert reply(HookEvent.STOP, {"decision": "block"}) == HookReply(
        "block", "blocked by a Stop hook"
    )
    assert reply(HookEvent.STOP, {"continue": False, "stopReason": "halt"}) == HookReply(
        "none", halt=True
    )


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        '{"decision": "maybe"}',
        '{"decision": 1}',
        '{"continue": "no"}',
        '{"hookSpecificOutput": []}',
        '{"hookSpecificOutput": {"permissionDecision": "yes"}}',
        '{"hookSpecificOutput": {"permissionDecision": true}}',
        '{"hookSpecificOutput": {"hookEventName": "PostToolUse", "permissionDecision": "deny"}}',
        '{"hookSpecificOutput": {"additionalContext": 5}}',
        '{"reason": ["x"]}',
    ],
)
def test_garbage_that_looks_like_json_is_invalid_output_not_a_decision(text: str) -> None:
    result = reply(PRE, text)
    assert result.decision == "invalid-output"
    assert result.problem


def test_merge_order_is_deny_over_ask_over_allow() -> None:
    allow, ask, deny = HookReply("allow"), HookReply("ask", "a?"), HookReply("deny", "no")
    none, bad = HookReply("none", contexts=("c1",)), HookReply("invalid-output")
    assert merge([allow, ask, deny, none]).decision == "deny"
    assert merge([deny, ask]).reason == "no"
    assert merge([allow, ask, bad]).decision == "ask"
    assert merge([allow, bad, none]).decision == "allow"
    assert merge([bad, none]).decision == "none"
    assert merge([]).decision == "none"
    two = merge([HookReply("deny", "r1"), HookReply("deny", "r2"), HookReply("deny", "r1")])
    assert two.reason == "r1\nr2"
    assert merge([none, HookReply("allow", contexts=("c2",))]).contexts == ("c1", "c2")


def test_env_always_has_a_path() -> None:
    assert hook_env("/p", environ={})["PATH"]
    assert hook_env("/p", environ={"PATH": "/x", "SECRET": "s"}) == {
        "PATH": "/x",
        "CLAUDE_PROJECT_DIR": "/p",
    }
