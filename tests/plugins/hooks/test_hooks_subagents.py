"""Hooks and real delegation (``tether.subagents`` one-shot driver): the reference fixture
``hook-cc-pretool-ask`` is a Claude Code hook returning ``ask`` on a *child's* tool call, which
becomes an approval request for the child, rejected by its ``never`` pin (``docs/hooks.md``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hooks_support import compose, dump_hook, group, normalized, payloads, py_hook, write_call

from tether.session.persistence._jsonl import JsonlPersistence
from tether.subagents._oneshot import OneShotRequest, run_one_shot
from tether.subagents._plugin import plugin as subagents_plugin

ASK = (
    "sys.stdin.read()\n"
    "print(json.dumps({'hookSpecificOutput': {'hookEventName': 'PreToolUse', "
    "'permissionDecision': 'ask', 'permissionDecisionReason': 'writes need a human'}}))\n"
)


async def test_hook_ask_on_a_childs_call_is_rejected_by_the_never_pin(tmp_path: Path) -> None:
    out = tmp_path / "lifecycle.jsonl"
    start = py_hook(
        tmp_path,
        "start.py",
        f"open({str(out)!r}, 'a').write(sys.stdin.read())\n"
        "print(json.dumps({'hookSpecificOutput': {'additionalContext': 'stay in ws/'}}))\n",
    )
    persistence = JsonlPersistence(tmp_path / "store")
    rig = compose(
        tmp_path,
        {
            "PreToolUse": [group(py_hook(tmp_path, "ask.py", ASK), "Write")],
            "SubagentStart": [group(start, "probe")],
            "SubagentStop": [group(dump_hook(tmp_path, "stop.py", out))],
        },
        answer="allowed-once",
        persistence=persistence,
        script={
            "agents": [
                {
                    "match": {"depth": 1},
                    "steps": [write_call(), {"text": "child gave up", "expect": "rejected"}],
                },
                {"match": {"depth": 0}, "steps": [{"text": "parent"}]},
            ]
        },
    )
    result = await run_one_shot(OneShotRequest(rig.agent, "write the marker", label="probe"))
    await rig.hooks.settle()
    assert (result.stop_reason, result.output) == ("completed", "child gave up")
    assert not (rig.workspace / "marker.txt").exists()
    assert rig.asked == []  # the pin rejects before any answerer is consulted
    child = (await rig.store.inspect(result.child_id)).events
    types = [e.type for e in child]
    start_at = types.index("tool/call")
    assert types[start_at : start_at + 6] == [
        "tool/call",
        "hook/invoked",
        "hook/result",
        "approval/asked",
        "approval/decided",
        "tool/result",
    ]
    by_type: dict[str, Any] = {e.type: normalized(e) for e in child[start_at : start_at + 6]}
    assert by_type["hook/result"]["decision"] == "ask"
    assert by_type["approval/asked"]["reason"] == "writes need a human"
    assert by_type["approval/decided"]["outcome"] == "rejected"
    assert by_type["tool/result"]["content"] == 'Error: the user rejected tool "write"'
    # SubagentStart's context reached the child's first step, right after its prompt.
    messages = [dict(e.data) for e in child if e.type == "user/message"]
    assert messages[:2] == [
        {"content": "write the marker", "source": {"kind": "user"}},
        {
            "content": "stay in ws/",
            "source": {"kind": "plugin", "plugin": "hooks", "hook_event": "SubagentStart"},
        },
    ]
    start_payload, stop_payload = payloads(out)
    assert start_payload == {
        "session_id": rig.session.id,
        "transcript_path": str(persistence.log_path(rig.session.id)),
        "cwd": str(rig.workspace),
        "hook_event_name": "SubagentStart",
        "agent_id": result.child_id,
        "agent_type": "probe",
    }
    assert stop_payload == {
        "session_id": rig.session.id,
        "transcript_path": str(persistence.log_path(rig.session.id)),
        "cwd": str(rig.workspace),
        "hook_event_name": "SubagentStop",
        "stop_hook_active": False,
        "agent_id": result.child_id,
        "agent_type": "probe",
        "agent_transcript_path": str(persistence.log_path(result.child_id)),
    }
    await rig.store.close()


async def test_delegation_through_the_subagent_tool_records_in_the_parents_turn(
    tmp_path: Path,
) -> None:
    out = tmp_path / "lifecycle.jsonl"
    rig = compose(
        tmp_path,
        {
            "SubagentStart": [group(dump_hook(tmp_path, "start.py", out))],
            "SubagentStop": [group(dump_hook(tmp_path, "stop.py", out))],
        },
        persistence=JsonlPersistence(tmp_path / "store"),
        after_hooks=lambda kernel: kernel.load(
            subagents_plugin, {"instances": [{"name": "subagent", "background_mode": "one-shot"}]}
        ),
        script={
            "agents": [
                {"match": {"depth": 1}, "steps": [{"text": "child report"}]},
                {
                    "match": {"depth": 0},
                    "steps": [
                        {
                            "tool_calls": [
                                {
                                    "name": "subagent",
                                    "arguments": {"description": "probe", "prompt": "look"},
                                }
                            ]
                        },
                        {"text": "parent done", "expect": "child report"},
                    ],
                },
            ]
        },
    )
    result = await rig.agent.run("delegate")
    await rig.hooks.settle()
    assert (result.stop_reason, result.output) == ("completed", "parent done")
    types = rig.layout()
    call_at = types.index("tool/call")
    # SubagentStart ran inside the parent's turn, during the delegating call, and before the
    # child's first step (which waited for it); its pair was written when it finished.
    assert types[call_at : call_at + 3] == ["tool/call", "hook/invoked", "hook/result"]
    records = [normalized(e) for e in rig.events("hook/invoked", "hook/result")]
    assert records[:2] == [
        {
            "turn": 1,
            "point": "SubagentStart",
            "dialect": "claude-code",
            "handler_id": "tether.toml#SubagentStart[0].hooks[0]",
        },
        {
            "turn": 1,
            "point": "SubagentStart",
            "handler_id": "tether.toml#SubagentStart[0].hooks[0]",
            "decision": "none",
            "exit_code": 0,
            "duration_ms": "<ms>",
        },
    ]
    # SubagentStop runs in the background as the parent moves on: it is recorded only if the
    # parent's turn was still open when it finished, and then always as a whole pair.
    assert [r["point"] for r in records[2:]] in ([], ["SubagentStop", "SubagentStop"])
    start, stop = payloads(out)
    child_id = start["agent_id"]
    assert (start["hook_event_name"], start["agent_type"]) == ("SubagentStart", "probe")
    assert (stop["hook_event_name"], stop["agent_id"], stop["agent_type"]) == (
        "SubagentStop",
        child_id,
        "probe",
    )
    await rig.store.close()
