"""PreToolUse through the whole pipeline: a real agent, real tools, real hook processes, and the
approval service. Reproduces the reference scenarios ``hook-cc-pretool-ask`` and
``hook-cc-pretool-deny`` (``docs/hooks.md``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hooks_support import (
    Rig,
    compose,
    group,
    normalized,
    py_hook,
    reply_hook,
    script,
    wait_for_file,
    write_call,
)

from tether._signals import AbortSignal
from tether.kernel import Next
from tether.kernel._plugin import Kernel
from tether.tools._base import PreDecision, ToolCall
from tether.tools._pipeline import ABORTED_BEFORE_DISPATCH, TOOLS_SERVICE
from tether.tools._seams import PRE_EXECUTE

ASK = {
    "hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "ask",
        "permissionDecisionReason": "writes need a human",
    }
}
ALLOW = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}
DENY = {
    "hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": "policy says no",
    }
}
ID0 = "tether.toml#PreToolUse[0].hooks[0]"


def tool_slice(rig: Rig) -> list[str]:
    """Event types from the first ``tool/call`` to the first ``tool/result``."""
    types = rig.layout()
    start = types.index("tool/call")
    return types[start : types.index("tool/result", start) + 1]


def tool_result(rig: Rig) -> dict[str, Any]:
    return dict(rig.events("tool/result")[0].data)


def hook_results(rig: Rig) -> list[dict[str, Any]]:
    return [normalized(e) for e in rig.events("hook/result")]


async def test_hook_cc_pretool_ask_reaches_the_approval_service(tmp_path: Path) -> None:
    hook = reply_hook(tmp_path, "ask.py", ASK)
    rig = compose(
        tmp_path,
        {"PreToolUse": [group(hook, "Write|Edit")]},
        [write_call(), {"text": "done", "expect": "rejected"}],
        answer="rejected",
    )
    result = await rig.agent.run("write the marker")
    assert (result.stop_reason, result.output) == ("completed", "done")
    assert not (rig.workspace / "marker.txt").exists()
    call_id = rig.events("tool/call")[0].data["call_id"]
    assert tool_result(rig) == {
        "call_id": call_id,
        "name": "write",
        "content": 'Error: the user rejected tool "write"',
        "is_error": True,
    }
    assert tool_slice(rig) == [
        "tool/call",
        "hook/invoked",
        "hook/result",
        "approval/asked",
        "approval/decided",
        "tool/result",
    ]
    invoked, res, asked, decided = (
        normalized(e)
        for e in rig.events("hook/invoked", "hook/result", "approval/asked", "approval/decided")
    )
    assert invoked == {
        "turn": 1,
        "point": "PreToolUse",
        "dialect": "claude-code",
        "matcher": "Write|Edit",
        "handler_id": ID0,
    }
    assert res == {
        "turn": 1,
        "point": "PreToolUse",
        "handler_id": ID0,
        "decision": "ask",
        "exit_code": 0,
        "duration_ms": "<ms>",
    }
    assert asked == {
        "id": "<id>",
        "tool_name": "write",
        "call_id": call_id,
        "reason": "writes need a human",
        "action": {"tool": "write", "path": "marker.txt"},
    }
    assert decided == {"id": "<id>", "outcome": "rejected"}
    ids = [e.data["id"] for e in rig.events("approval/asked", "approval/decided")]
    assert ids[0] == ids[1]
    assert [(r.tool_name, r.call_id, r.reason) for r in rig.asked] == [
        ("write", call_id, "writes need a human")
    ]


async def test_hook_ask_under_a_never_policy_is_rejected_without_asking(tmp_path: Path) -> None:
    # The reference fixture: a delegated child is pinned to ``never``, so a hook's ask on its
    # call is rejected by the service before any answerer runs.
    rig = compose(
        tmp_path,
        {"PreToolUse": [group(reply_hook(tmp_path, "ask.py", ASK))]},
        [write_call()],
        answer="allowed-once",
        approval_policy="never",
    )
    await rig.agent.run("write")
    assert tool_result(rig)["content"] == 'Error: the user rejected tool "write"'
    assert rig.asked == []
    assert [normalized(e) for e in rig.events("approval/decided")] == [
        {"id": "<id>", "outcome": "rejected"}
    ]
    assert not (rig.workspace / "marker.txt").exists()


async def test_hook_ask_allowed_once_runs_the_tool(tmp_path: Path) -> None:
    rig = compose(
        tmp_path,
        {"PreToolUse": [group(reply_hook(tmp_path, "ask.py", ASK))]},
        [write_call(content="approved")],
        answer="allowed-once",
    )
    await rig.agent.run("write")
    assert tool_result(rig)["content"] == "wrote marker.txt"
    assert (rig.workspace / "marker.txt").read_text() == "approved"


async def test_hook_cc_pretool_deny_never_runs_the_tool(tmp_path: Path) -> None:
    hook = script(
        tmp_path, "deny.sh", "#!/bin/sh\ncat >/dev/null\necho 'writes are frozen' >&2\nexit 2\n"
    )
    rig = compose(
        tmp_path,
        {"PreToolUse": [group(hook, "Write")]},
        [write_call(), {"text": "ok", "expect": "frozen"}],
        answer="allowed-once",
    )
    result = await rig.agent.run("write")
    assert result.stop_reason == "completed"
    assert not (rig.workspace / "marker.txt").exists()
    assert tool_result(rig)["content"] == "Error: writes are frozen"
    assert tool_result(rig)["is_error"] is True
    assert tool_slice(rig) == ["tool/call", "hook/invoked", "hook/result", "tool/result"]
    assert hook_results(rig) == [
        {
            "turn": 1,
            "point": "PreToolUse",
            "handler_id": ID0,
            "decision": "block",
            "exit_code": 2,
            "stderr_summary": "writes are frozen",
            "duration_ms": "<ms>",
        }
    ]
    assert rig.asked == []


async def test_json_deny_uses_the_permission_decision_reason(tmp_path: Path) -> None:
    rig = compose(
        tmp_path,
        {"PreToolUse": [group(reply_hook(tmp_path, "deny.py", DENY))]},
        [write_call()],
    )
    await rig.agent.run("write")
    assert tool_result(rig)["content"] == "Error: policy says no"
    assert not (rig.workspace / "marker.txt").exists()


async def test_hook_allow_runs_the_tool(tmp_path: Path) -> None:
    rig = compose(
        tmp_path,
        {"PreToolUse": [group(reply_hook(tmp_path, "allow.py", ALLOW))]},
        [write_call()],
    )
    await rig.agent.run("write")
    assert tool_result(rig)["content"] == "wrote marker.txt"
    assert [r["decision"] for r in hook_results(rig)] == ["allow"]


def deny_writes(kernel: Kernel) -> None:
    async def listener(call: ToolCall, next: Next) -> Any:
        if call.name == "write":
            return PreDecision.deny("writes are off for this project")
        return await next()

    kernel.ctx.on(PRE_EXECUTE, listener)


def ask_for_writes(kernel: Kernel) -> None:
    async def listener(call: ToolCall, next: Next) -> Any:
        if call.name == "write":
            return PreDecision.ask("the gate wants a human")
        return await next()

    kernel.ctx.on(PRE_EXECUTE, listener)


async def test_hook_allow_never_overrides_a_later_deny_listener(tmp_path: Path) -> None:
    rig = compose(
        tmp_path,
        {"PreToolUse": [group(reply_hook(tmp_path, "allow.py", ALLOW))]},
        [write_call()],
        after_hooks=deny_writes,
    )
    await rig.agent.run("write")
    assert tool_result(rig)["content"] == "Error: writes are off for this project"
    assert not (rig.workspace / "marker.txt").exists()


async def test_hook_allow_never_overrides_a_later_ask_listener(tmp_path: Path) -> None:
    rig = compose(
        tmp_path,
        {"PreToolUse": [group(reply_hook(tmp_path, "allow.py", ALLOW))]},
        [write_call()],
        answer="rejected",
        after_hooks=ask_for_writes,
        config={"fail_closed": False},
    )
    await rig.agent.run("write")
    assert tool_result(rig)["content"] == 'Error: the user rejected tool "write"'
    assert [r.reason for r in rig.asked] == ["the gate wants a human"]


async def test_hook_ask_loses_to_a_later_deny_listener(tmp_path: Path) -> None:
    rig = compose(
        tmp_path,
        {"PreToolUse": [group(reply_hook(tmp_path, "ask.py", ASK))]},
        [write_call()],
        answer="allowed-once",
        after_hooks=deny_writes,
    )
    await rig.agent.run("write")
    assert tool_result(rig)["content"] == "Error: writes are off for this project"
    assert rig.asked == []
    assert rig.events("approval/asked") == []


async def test_an_earlier_deny_listener_short_circuits_the_hooks(tmp_path: Path) -> None:
    rig = compose(
        tmp_path,
        {"PreToolUse": [group(reply_hook(tmp_path, "allow.py", ALLOW))]},
        [write_call()],
        before_hooks=deny_writes,
    )
    await rig.agent.run("write")
    assert tool_result(rig)["content"] == "Error: writes are off for this project"
    assert rig.events("hook/invoked") == []


async def test_several_hooks_merge_deny_over_ask_over_allow(tmp_path: Path) -> None:
    allow = reply_hook(tmp_path, "allow.py", ALLOW)
    ask = reply_hook(tmp_path, "ask.py", ASK)
    deny = reply_hook(tmp_path, "deny.py", DENY)
    rig = compose(
        tmp_path,
        {"PreToolUse": [group(allow), group(ask, "Write"), group(deny, "Wr.*")]},
        [write_call()],
        answer="allowed-once",
    )
    await rig.agent.run("write")
    assert tool_result(rig)["content"] == "Error: policy says no"
    assert rig.asked == []
    # Serially, in configuration order, every one recorded.
    assert tool_slice(rig) == ["tool/call", *["hook/invoked", "hook/result"] * 3, "tool/result"]
    assert [(r["handler_id"], r["decision"]) for r in hook_results(rig)] == [
        ("tether.toml#PreToolUse[0].hooks[0]", "allow"),
        ("tether.toml#PreToolUse[1].hooks[0]", "ask"),
        ("tether.toml#PreToolUse[2].hooks[0]", "deny"),
    ]
    matchers = [e.data.get("matcher") for e in rig.events("hook/invoked")]
    assert matchers == [None, "Write", "Wr.*"]
    assert "matcher" not in rig.events("hook/invoked")[0].data


async def test_ask_beats_allow_between_hooks(tmp_path: Path) -> None:
    rig = compose(
        tmp_path,
        {
            "PreToolUse": [
                group(reply_hook(tmp_path, "allow.py", ALLOW)),
                group(reply_hook(tmp_path, "ask.py", ASK)),
            ]
        },
        [write_call()],
        answer="rejected",
    )
    await rig.agent.run("write")
    assert tool_result(rig)["content"] == 'Error: the user rejected tool "write"'
    assert [r.reason for r in rig.asked] == ["writes need a human"]


def broken_hooks(tmp_path: Path) -> list[dict[str, Any]]:
    garbage = py_hook(tmp_path, "garbage.py", "print('{\"hookSpecificOutput\": {oops')\n")
    wrong_type = reply_hook(tmp_path, "wrong.py", {"decision": 42})
    hang = script(tmp_path, "hang.sh", "#!/bin/sh\nexec sleep 300\n")
    crash = py_hook(tmp_path, "crash.py", "raise SystemExit('crashed hard')\n")
    no_interp = script(tmp_path, "nointerp.py", "#!/nonexistent/python3\n")
    return [
        group(garbage),
        group(wrong_type),
        group(hang, timeout=0.3),
        group(crash),
        group(no_interp),
    ]


async def test_garbage_hanging_and_crashing_hooks_are_reported_and_never_crash_the_run(
    tmp_path: Path,
) -> None:
    rig = compose(
        tmp_path,
        {"PreToolUse": broken_hooks(tmp_path)},
        [write_call(), {"text": "finished"}],
        config={"fail_closed": False},
    )
    result = await rig.agent.run("write")
    assert (result.stop_reason, result.output) == ("completed", "finished")
    # Opted out of failing closed (Claude Code's behaviour): no decision from any of them, so
    # the rest of the chain (here: allow) decides.
    assert tool_result(rig)["content"] == "wrote marker.txt"
    results = hook_results(rig)
    assert [r["decision"] for r in results] == [
        "invalid-output",
        "invalid-output",
        "timeout",
        "error",
        "error",
    ]
    assert "exit_code" not in results[2]
    assert (results[3]["exit_code"], results[3]["stderr_summary"]) == (1, "crashed hard")
    assert results[4]["exit_code"] in (126, 127)
    assert "nointerp.py" in results[4]["stderr_summary"]  # the shell's own complaint
    assert rig.layout()[-1] == "turn/end"


async def test_broken_hooks_never_turn_an_ask_into_an_allow(tmp_path: Path) -> None:
    rig = compose(
        tmp_path,
        {"PreToolUse": broken_hooks(tmp_path)},
        [write_call()],
        answer="rejected",
        after_hooks=ask_for_writes,
        config={"fail_closed": False},
    )
    await rig.agent.run("write")
    assert tool_result(rig)["content"] == 'Error: the user rejected tool "write"'


async def test_by_default_a_broken_hook_denies(tmp_path: Path) -> None:
    rig = compose(
        tmp_path,
        {"PreToolUse": [group(py_hook(tmp_path, "garbage.py", "print('{oops')\n"))]},
        [write_call()],
    )
    await rig.agent.run("write")
    content = tool_result(rig)["content"]
    assert content.startswith(f"Error: PreToolUse hook {ID0} failed (stdout is not valid JSON: ")
    assert content.endswith("); denied because hooks fail closed")
    assert [r["decision"] for r in hook_results(rig)] == ["invalid-output"]
    assert not (rig.workspace / "marker.txt").exists()


async def test_cancelling_during_a_hook_kills_it_and_never_runs_the_tool(tmp_path: Path) -> None:
    started = tmp_path / "started"
    hook = script(tmp_path, "slow.sh", f"#!/bin/sh\ntouch {started}\nexec sleep 300\n")
    rig = compose(tmp_path, {"PreToolUse": [group(hook)]}, [write_call()])
    rig.agent.followup("write")
    await wait_for_file(started)
    rig.agent.cancel("user")
    await rig.agent.when_idle()
    assert rig.agent.last_result is not None
    assert rig.agent.last_result.stop_reason == "aborted"
    assert tool_result(rig)["content"] == f"Error: {ABORTED_BEFORE_DISPATCH}"
    assert [r["decision"] for r in hook_results(rig)] == ["cancelled"]
    assert not (rig.workspace / "marker.txt").exists()


async def test_a_non_matching_matcher_runs_nothing_and_records_nothing(tmp_path: Path) -> None:
    out = tmp_path / "ran"
    rig = compose(
        tmp_path,
        {"PreToolUse": [group(f"touch {out}", "Bash"), group(f"touch {out}", "bash|Edit")]},
        [write_call()],
    )
    await rig.agent.run("write")
    assert tool_result(rig)["content"] == "wrote marker.txt"
    assert rig.events("hook/invoked", "hook/result") == []
    assert not out.exists()


async def test_hooks_run_serially(tmp_path: Path) -> None:
    log = tmp_path / "order"
    first = script(
        tmp_path, "first.sh", f"#!/bin/sh\necho start1 >> {log}\nsleep 0.2\necho end1 >> {log}\n"
    )
    second = script(tmp_path, "second.sh", f"#!/bin/sh\necho start2 >> {log}\n")
    rig = compose(tmp_path, {"PreToolUse": [group(first), group(second)]}, [write_call()])
    await rig.agent.run("write")
    assert log.read_text().split() == ["start1", "end1", "start2"]


async def test_teardown_mid_hook_closes_the_record_pair(tmp_path: Path) -> None:
    started = tmp_path / "started"
    hook = script(tmp_path, "slow.sh", f"#!/bin/sh\ntouch {started}\nexec sleep 300\n")
    rig = compose(tmp_path, {"PreToolUse": [group(hook)]})
    rig.session.append("turn/start", {"turn": 1})
    tools = rig.kernel.ctx.get(TOOLS_SERVICE)
    task = asyncio.ensure_future(
        tools.execute(rig.agent, "c1", "write", '{"path": "m", "content": ""}', AbortSignal())
    )
    await wait_for_file(started)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [normalized(e) for e in rig.events("hook/invoked", "hook/result")] == [
        {
            "turn": 1,
            "point": "PreToolUse",
            "dialect": "claude-code",
            "handler_id": ID0,
        },
        {
            "turn": 1,
            "point": "PreToolUse",
            "handler_id": ID0,
            "decision": "cancelled",
            "duration_ms": "<ms>",
        },
    ]
    assert not (rig.workspace / "m").exists()
