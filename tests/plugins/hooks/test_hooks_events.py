"""PostToolUse, Stop, SessionStart, UserPromptSubmit, SubagentStart/SubagentStop, and plugin
teardown, each with real hook processes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from hooks_support import (
    compose,
    dump_hook,
    group,
    normalized,
    payloads,
    pid_alive,
    py_hook,
    script,
    wait_for_file,
    write_call,
)

from tether.agent import Agent
from tether.agent._agent import PRE_TURN, AgentOptions, PreTurn, TurnRejected
from tether.agent._inbox import InboxItem
from tether.model import ScriptedModel
from tether.session import SessionMeta
from tether.subagents._seams import SUBAGENT_END, SUBAGENT_START

POST_SOURCE = {"kind": "plugin", "plugin": "hooks", "hook_event": "PostToolUse"}


def user_messages(rig: Any) -> list[dict[str, Any]]:
    return [dict(e.data) for e in rig.events("user/message")]


# -- PostToolUse ---------------------------------------------------------------------------------
async def test_post_tool_use_exit_2_blocks_the_result(tmp_path: Path) -> None:
    hook = script(
        tmp_path, "lint.sh", "#!/bin/sh\ncat >/dev/null\necho 'lint failed' >&2\nexit 2\n"
    )
    rig = compose(
        tmp_path,
        {"PostToolUse": [group(hook, "Write")]},
        [write_call(), {"text": "ok", "expect": "lint failed"}],
    )
    result = await rig.agent.run("write")
    assert result.stop_reason == "completed"
    assert (rig.workspace / "marker.txt").exists()  # the tool ran; only its result is blocked
    (tool_result,) = rig.events("tool/result")
    assert (tool_result.data["content"], tool_result.data["is_error"]) == (
        "Error: lint failed",
        True,
    )
    types = rig.layout()
    start = types.index("tool/call")
    assert types[start : start + 4] == ["tool/call", "hook/invoked", "hook/result", "tool/result"]
    assert [normalized(e) for e in rig.events("hook/result")] == [
        {
            "turn": 1,
            "point": "PostToolUse",
            "handler_id": "tether.toml#PostToolUse[0].hooks[0]",
            "decision": "block",
            "exit_code": 2,
            "stderr_summary": "lint failed",
            "duration_ms": "<ms>",
        }
    ]


async def test_post_tool_use_json_block_and_context(tmp_path: Path) -> None:
    block = py_hook(
        tmp_path,
        "block.py",
        "print(json.dumps({'decision': 'block', 'reason': 'tests broke', "
        "'hookSpecificOutput': {'hookEventName': 'PostToolUse', "
        "'additionalContext': 'see test.log'}}))\n",
    )
    rig = compose(tmp_path, {"PostToolUse": [group(block)]}, [write_call(), {"text": "ok"}])
    await rig.agent.run("write")
    (tool_result,) = rig.events("tool/result")
    assert tool_result.data["content"] == "Error: tests broke"
    assert user_messages(rig)[-1] == {"content": "see test.log", "source": POST_SOURCE}


async def test_post_tool_use_context_reaches_the_next_step(tmp_path: Path) -> None:
    hook = py_hook(
        tmp_path,
        "ctx.py",
        "print(json.dumps({'hookSpecificOutput': {'additionalContext': 'formatted a.txt'}}))\n",
    )
    rig = compose(tmp_path, {"PostToolUse": [group(hook)]}, [write_call(), {"text": "ok"}])
    await rig.agent.run("write")
    (tool_result,) = rig.events("tool/result")
    assert tool_result.data["content"] == "wrote marker.txt"
    types = rig.layout()
    second_step = types.index("step/start", types.index("tool/result"))
    assert types[second_step : second_step + 2] == ["step/start", "user/message"]
    assert rig.session.events[second_step + 1].data == {
        "content": "formatted a.txt",
        "source": POST_SOURCE,
    }


# -- Stop ----------------------------------------------------------------------------------------
async def test_stop_hook_runs_at_turn_end_outside_the_turn(tmp_path: Path) -> None:
    out = tmp_path / "stop.jsonl"
    rig = compose(tmp_path, {"Stop": [group(dump_hook(tmp_path, "stop.py", out))]})
    await rig.agent.run("hi")
    await rig.hooks.settle()
    assert payloads(out) == [
        {
            "session_id": rig.session.id,
            "transcript_path": None,
            "cwd": str(rig.workspace),
            "hook_event_name": "Stop",
            "stop_hook_active": False,
        }
    ]
    # turn/end came first, so there is no open turn for the records: the hook ran anyway.
    assert rig.events("hook/invoked", "hook/result") == []
    assert rig.layout()[-1] == "turn/end"


async def test_a_blocking_stop_hook_continues_with_its_reason(tmp_path: Path) -> None:
    out = tmp_path / "stop.jsonl"
    hook = py_hook(
        tmp_path,
        "stop.py",
        f"data = sys.stdin.read()\nopen({str(out)!r}, 'a').write(data)\n"
        "if not json.loads(data)['stop_hook_active']:\n"
        "    print(json.dumps({'decision': 'block', 'reason': 'run the tests too'}))\n",
    )
    rig = compose(
        tmp_path,
        {"Stop": [group(hook)]},
        [{"text": "first"}, {"text": "second", "expect": "run the tests too"}],
    )
    await rig.agent.run("hi")
    await rig.hooks.settle()
    await rig.agent.when_idle()
    await rig.hooks.settle()
    assert [p["stop_hook_active"] for p in payloads(out)] == [False, True]
    assert [e.data for e in rig.events("turn/end")] == [
        {"turn": 1, "reason": "completed"},
        {"turn": 2, "reason": "completed"},
    ]
    continuation = [m for m in user_messages(rig) if m["content"] == "run the tests too"]
    assert continuation == [
        {
            "content": "run the tests too",
            "source": {"kind": "plugin", "plugin": "hooks", "hook_event": "Stop"},
        }
    ]
    assert rig.agent.last_result is not None and rig.agent.last_result.output == "second"


async def test_no_stop_hook_after_a_user_interrupt(tmp_path: Path) -> None:
    out, started = tmp_path / "stop.jsonl", tmp_path / "started"
    slow = script(tmp_path, "slow.sh", f"#!/bin/sh\ntouch {started}\nexec sleep 300\n")
    rig = compose(
        tmp_path,
        {"Stop": [group(dump_hook(tmp_path, "stop.py", out))], "PreToolUse": [group(slow)]},
        [write_call()],
    )
    rig.agent.followup("write")
    await wait_for_file(started)
    rig.agent.cancel("user")
    await rig.agent.when_idle()
    await rig.hooks.settle()
    assert rig.agent.last_result is not None
    assert rig.agent.last_result.stop_reason == "aborted"
    assert payloads(out) == []


# -- SessionStart --------------------------------------------------------------------------------
async def test_session_start_runs_at_creation_and_its_output_reaches_the_first_step(
    tmp_path: Path,
) -> None:
    out = tmp_path / "start.jsonl"
    hook = py_hook(
        tmp_path,
        "start.py",
        # Slow enough that the first step starts waiting for it inside turn 1: it began
        # outside any turn, so it is still not recorded there.
        f"open({str(out)!r}, 'a').write(sys.stdin.read())\n"
        "import time; time.sleep(0.1)\nprint('branch: main')\n",
    )
    rig = compose(tmp_path, {"SessionStart": [group(hook)]})
    await rig.agent.run("hi")
    assert payloads(out) == [
        {
            "session_id": rig.session.id,
            "transcript_path": None,
            "cwd": str(rig.workspace),
            "hook_event_name": "SessionStart",
            "source": "startup",
        }
    ]
    messages = user_messages(rig)
    assert messages[0] == {"content": "hi", "source": {"kind": "user"}}
    assert messages[1] == {
        "content": "branch: main",
        "source": {"kind": "plugin", "plugin": "hooks", "hook_event": "SessionStart"},
    }
    assert rig.events("hook/invoked", "hook/result") == []  # it ran before any turn


async def test_session_start_source_and_matcher(tmp_path: Path) -> None:
    out = tmp_path / "start.jsonl"
    rig = compose(
        tmp_path, {"SessionStart": [group(dump_hook(tmp_path, "start.py", out), "resume")]}
    )
    await rig.agent.run("hi")
    fork = await rig.store.fork(rig.session.id)
    rig.store.create(meta=SessionMeta(origin="subagent", delegation_depth=1, cwd="/"))
    await rig.hooks.settle()
    assert [(p["session_id"], p["source"]) for p in payloads(out)] == [(fork.id, "resume")]


# -- UserPromptSubmit ----------------------------------------------------------------------------
async def test_user_prompt_submit_can_block_or_add_context(tmp_path: Path) -> None:
    out = tmp_path / "prompt.jsonl"
    hook = py_hook(
        tmp_path,
        "_prompt.py",
        f"data = sys.stdin.read()\nopen({str(out)!r}, 'a').write(data)\n"
        "if 'password' in json.loads(data)['prompt']:\n"
        "    print('prompts must not contain secrets', file=sys.stderr)\n"
        "    sys.exit(2)\n"
        "print('the user prefers short answers')\n",
    )
    rig = compose(tmp_path, {"UserPromptSubmit": [group(hook)]})
    ctx = rig.kernel.ctx

    async def pre_turn(prompt: InboxItem) -> TurnRejected | None:
        return await ctx.waterfall(PRE_TURN, PreTurn(rig.agent, prompt), None, scope=rig.agent)

    assert await pre_turn(InboxItem("my password is hunter2")) == TurnRejected(
        "a UserPromptSubmit hook blocked the prompt: prompts must not contain secrets"
    )
    assert rig.agent.inbox.pending("inject") == 0
    assert await pre_turn(InboxItem("summarise the repo")) is None
    assert rig.agent.inbox.pending("inject") == 1
    # Not a user prompt (a plugin's followup): no hook.
    assert await pre_turn(InboxItem("from a plugin", {"kind": "plugin", "plugin": "x"})) is None
    assert [p["prompt"] for p in payloads(out)] == [
        "my password is hunter2",
        "summarise the repo",
    ]
    assert payloads(out)[0]["hook_event_name"] == "UserPromptSubmit"


# -- SubagentStart / SubagentStop ----------------------------------------------------------------
async def test_subagent_notifications_as_tuples(tmp_path: Path) -> None:
    # The (parent, child agent or id, description) form; the delegation code's own
    # SubagentLifecycle form is covered in test_hooks_subagents.py.
    out = tmp_path / "sub.jsonl"
    start = py_hook(
        tmp_path,
        "start.py",
        f"open({str(out)!r}, 'a').write(sys.stdin.read())\n"
        "print(json.dumps({'hookSpecificOutput': {'hookEventName': 'SubagentStart', "
        "'additionalContext': 'you are a probe'}}))\n",
    )
    stop = dump_hook(tmp_path, "stop.py", out)
    rig = compose(
        tmp_path,
        {"SubagentStart": [group(start, "probe")], "SubagentStop": [group(stop)]},
    )
    child_session = rig.store.create(
        meta=SessionMeta(origin="subagent", delegation_depth=1, cwd=str(rig.workspace))
    )
    model = ScriptedModel.from_dict({"agents": [{"steps": [{"text": "child ok"}]}]})
    child = Agent(rig.kernel.ctx, child_session, AgentOptions(model, label="probe"))
    rig.kernel.ctx.emit(SUBAGENT_START, (rig.agent, child, "look around"))
    rig.kernel.ctx.emit(SUBAGENT_START, (rig.agent, "other-id", "other"))  # matcher: no
    await child.run("go")  # its first step waits for SubagentStart and gets the context
    rig.kernel.ctx.emit(SUBAGENT_END, (rig.agent, child, "look around"))
    await rig.hooks.settle()
    common = {
        "session_id": rig.session.id,
        "transcript_path": None,
        "cwd": str(rig.workspace),
    }
    assert payloads(out) == [
        {
            **common,
            "hook_event_name": "SubagentStart",
            "agent_id": child.id,
            "agent_type": "probe",
        },
        {
            **common,
            "hook_event_name": "SubagentStop",
            "stop_hook_active": False,
            "agent_id": child.id,
            "agent_type": "probe",
            "agent_transcript_path": None,
        },
    ]
    messages = [dict(e.data) for e in child.session.events if e.type == "user/message"]
    assert messages[:2] == [
        {"content": "go", "source": {"kind": "user"}},
        {
            "content": "you are a probe",
            "source": {"kind": "plugin", "plugin": "hooks", "hook_event": "SubagentStart"},
        },
    ]


# -- teardown ------------------------------------------------------------------------------------
async def test_unloading_the_plugin_kills_running_background_hooks(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    hook = script(tmp_path, "stop.sh", f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 300\n")
    rig = compose(tmp_path, {"Stop": [group(hook)]})
    await rig.agent.run("hi")
    await wait_for_file(pidfile)
    while not pidfile.read_text().endswith("\n"):  # written, not just created
        await asyncio.sleep(0.005)
    pid = int(pidfile.read_text())
    hooks = rig.hooks
    rig.kernel.dispose()
    await hooks.settle()
    # SIGKILL is sent to the group before settle returns; under load the kernel may take a
    # moment to retire the process, so allow it a bounded time to die.
    for _ in range(500):
        if not pid_alive(pid):
            break
        await asyncio.sleep(0.01)
    assert not pid_alive(pid)
