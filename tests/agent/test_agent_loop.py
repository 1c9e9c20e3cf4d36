"""The agent loop: turns, steps, the runtime-context snapshot and request headers, stop
reasons, cancellation and the inbox."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from compose_support import compose_kernel
from event_support import kinds as layout
from tether.agent import (
    AGENTS_SERVICE,
    TEXT_DELTA,
    TURN_END,
    Agent,
    AgentRegistry,
    StreamedText,
    TurnEnded,
)
from tether.agent._agent import AgentOptions
from tether.agent._context_snapshot import SNAPSHOT_HEAD
from tether.kernel import SESSIONS_SERVICE
from tether.kernel._plugin import Kernel
from tether.model import ScriptedModel
from tether.policy import SANDBOX_POLICY_SERVICE
from tether.tools._base import ToolArgs, ToolCall, ToolResult


class EchoArgs(ToolArgs):
    text: str


class Echo:
    name = "echo"
    description = "Echo the text back."
    Args = EchoArgs

    async def run(self, call: ToolCall) -> ToolResult:
        assert isinstance(call.args, EchoArgs)
        return ToolResult(f"echo: {call.args.text}")


class SlowArgs(ToolArgs):
    pass


class Slow:
    name = "slow"
    description = "Wait until cancelled."
    Args = SlowArgs

    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def run(self, call: ToolCall) -> ToolResult:
        self.started.set()
        await asyncio.sleep(3600)
        return ToolResult("never")


def compose(
    steps: list[dict[str, Any]], tmp_path: Any, *, max_steps: int = 50, policies: bool = True
) -> tuple[Kernel, Agent, Slow]:
    slow = Slow()
    rig = compose_kernel(
        tmp_path,
        mode="workspace-write" if policies else None,
        approval="ask" if policies else None,
        tools=[Echo(), slow],
    )
    model = ScriptedModel.from_dict({"agents": [{"match": {}, "steps": steps}]})
    options = AgentOptions(model, max_steps=max_steps)
    agent = Agent(rig.ctx, rig.session(), options, tools=rig.tools)
    return rig.kernel, agent, slow


async def test_turn_with_a_tool_call_has_the_reference_layout(tmp_path: Any) -> None:
    _, agent, _ = compose(
        [
            {"tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}]},
            {"text": "done", "expect": "echo: hi"},
        ],
        tmp_path,
    )
    result = await agent.run("say hi")
    assert (result.stop_reason, result.output, result.turn) == ("completed", "done", 1)
    assert layout(agent) == [
        "agent/inbox/spliced",
        "turn/start",
        "step/start",
        "user/message",  # the claimed prompt
        "user/message",  # the runtime-context snapshot, after the prompt
        "request/header",  # ...and before the request header
        "assistant/message",
        "tool/call",
        "tool/result",
        "step/end",
        "step/start",
        "assistant/message",
        "step/end",
        "turn/end",
    ]
    events = agent.session.events
    assert events[3].data["content"] == "say hi"
    snapshot = events[4].data
    assert str(snapshot["content"]).startswith(SNAPSHOT_HEAD)
    assert snapshot["source"]["form"] == "snapshot"  # type: ignore[index]
    assert [s["name"] for s in snapshot["source"]["sections"]] == [  # type: ignore[index, union-attr]
        "sandbox:policy",
        "approval:policy",
    ]
    assert events[5].data["reason"] == "initial"
    assert events[8].data["content"] == "echo: hi"
    assert events[8].data["is_error"] is False
    assert events[-1].data == {"turn": 1, "reason": "completed"}


async def test_snapshot_and_header_are_appended_only_on_change(tmp_path: Any) -> None:
    kernel, agent, _ = compose([{"text": "one"}, {"text": "two"}, {"text": "three"}], tmp_path)
    await agent.run("first")
    await agent.run("second")
    snapshots = [
        e
        for e in agent.session.events
        if e.type == "user/message"
        and "source" in e.data
        and e.data["source"].get("form") == "snapshot"
    ]  # type: ignore[union-attr]
    headers = [e for e in agent.session.events if e.type == "request/header"]
    assert len(snapshots) == 1 and len(headers) == 1
    sandbox = kernel.ctx.get(SANDBOX_POLICY_SERVICE)
    assert sandbox is not None
    sandbox.set_sandbox_mode(agent.session, "read-only")
    await agent.run("third")
    snapshots = [
        e
        for e in agent.session.events
        if e.type == "user/message" and e.data["source"].get("form") == "snapshot"
    ]  # type: ignore[union-attr]
    assert len(snapshots) == 2
    assert "read-only" in str(snapshots[-1].data["content"])
    assert len([e for e in agent.session.events if e.type == "request/header"]) == 1


async def test_no_contexts_means_no_snapshot(tmp_path: Any) -> None:
    _, agent, _ = compose([{"text": "ok"}], tmp_path, policies=False)
    await agent.run("hello")
    assert "user/message" in layout(agent)
    assert not any(
        e.type == "user/message" and e.data["source"].get("form") == "snapshot"  # type: ignore[union-attr]
        for e in agent.session.events
    )


async def test_the_step_limit_ends_the_turn_max_steps(tmp_path: Any) -> None:
    steps = [{"tool_calls": [{"name": "echo", "arguments": {"text": str(i)}}]} for i in range(5)]
    _, agent, _ = compose(steps, tmp_path, max_steps=2)
    result = await agent.run("loop")
    detail = (
        "the turn reached its limit of 2 steps and stopped before step 3 "
        "(raise it with --max-steps, or max_steps in tether.toml)"
    )
    assert (result.stop_reason, result.error) == ("max-steps", detail)
    assert agent.session.events[-1].data == {"turn": 1, "reason": "max-steps", "detail": detail}
    assert [e.data["step"] for e in agent.session.events if e.type == "step/start"] == [1, 2]


async def test_length_finish_is_max_tokens(tmp_path: Any) -> None:
    _, agent, _ = compose([{"text": "cut off", "finish": "length"}], tmp_path)
    result = await agent.run("long")
    assert result.stop_reason == "max-tokens"


async def test_model_error_ends_the_turn_with_error(tmp_path: Any) -> None:
    _, agent, _ = compose([{"text": "x", "expect": "never-matches"}], tmp_path)
    result = await agent.run("hello")
    assert result.stop_reason == "error"
    end = agent.session.events[-1].data
    assert end["reason"] == "error" and str(end["error"]).startswith("MODEL_SCRIPT")
    # the interrupted step was closed
    assert layout(agent)[-2] == "step/end"


async def test_bad_arguments_are_an_error_result_not_a_crash(tmp_path: Any) -> None:
    _, agent, _ = compose(
        [
            {"tool_calls": [{"name": "echo", "arguments": {"text": 3, "extra": 1}}]},
            {"tool_calls": [{"name": "nope", "arguments": {}}]},
            {"text": "recovered"},
        ],
        tmp_path,
    )
    result = await agent.run("go")
    assert result.stop_reason == "completed"
    results = [e.data for e in agent.session.events if e.type == "tool/result"]
    assert results[0]["is_error"] is True
    assert str(results[0]["content"]).startswith('Error: invalid arguments for tool "echo": ')
    assert "extra" in str(results[0]["content"])
    assert results[1]["content"] == 'Error: unknown tool "nope"'


async def test_cancel_during_a_tool_aborts_with_cause(tmp_path: Any) -> None:
    _, agent, slow = compose([{"tool_calls": [{"name": "slow", "arguments": {}}]}], tmp_path)
    agent.followup("wait")
    await slow.started.wait()
    agent.cancel("parent")
    await agent.when_idle()
    assert agent.last_result is not None
    assert (agent.last_result.stop_reason, agent.last_result.cause) == ("aborted", "parent")
    tool_result = next(e for e in agent.session.events if e.type == "tool/result")
    assert tool_result.data["content"] == 'Error: tool "slow" was cancelled'
    assert agent.session.events[-1].data == {"turn": 1, "reason": "aborted", "cause": "parent"}
    assert not agent.session.has_open_turn()


async def test_inject_does_not_wake_and_rides_the_next_step(tmp_path: Any) -> None:
    _, agent, _ = compose([{"text": "a"}, {"text": "b"}], tmp_path)
    agent.inject("background fact", source={"kind": "plugin", "plugin": "test"})
    await asyncio.sleep(0)
    assert agent.status == "idle" and "turn/start" not in layout(agent)
    await agent.run("now")
    contents = [e.data["content"] for e in agent.session.events if e.type == "user/message"]
    assert contents[:2] == ["now", "background fact"]


async def test_followups_each_get_their_own_turn(tmp_path: Any) -> None:
    _, agent, _ = compose([{"text": "a"}, {"text": "b"}], tmp_path)
    agent.followup("one")
    agent.followup("two")
    await agent.when_idle()
    turns = [e.data for e in agent.session.events if e.type == "turn/end"]
    assert [t["turn"] for t in turns] == [1, 2]


async def test_cancel_without_keep_inbox_discards_queued_work(tmp_path: Any) -> None:
    _, agent, slow = compose([{"tool_calls": [{"name": "slow", "arguments": {}}]}], tmp_path)
    agent.followup("first")
    agent.followup("second")
    await slow.started.wait()
    agent.cancel("user")
    await agent.when_idle()
    assert [e.data["turn"] for e in agent.session.events if e.type == "turn/start"] == [1]
    cleared = [e.data for e in agent.session.events if e.type == "agent/inbox/spliced"][-1]
    assert cleared == {"target": "next-turn", "start": 0, "removed_count": 1}


@pytest.mark.parametrize("keep", [True])
async def test_cancel_with_keep_inbox_parks_work(tmp_path: Any, keep: bool) -> None:
    _, agent, slow = compose(
        [{"tool_calls": [{"name": "slow", "arguments": {}}]}, {"text": "second ran"}], tmp_path
    )
    agent.followup("first")
    agent.followup("second")
    await slow.started.wait()
    agent.cancel("user", keep_inbox=keep)
    await agent.when_idle()
    assert [e.data["turn"] for e in agent.session.events if e.type == "turn/start"] == [1, 2]
    assert agent.last_result is not None and agent.last_result.output == "second ran"


async def test_steers_are_claimed_at_the_next_step_together(tmp_path: Any) -> None:
    _, agent, slow = compose(
        [{"tool_calls": [{"name": "slow", "arguments": {}}]}, {"text": "after steering"}],
        tmp_path,
    )
    agent.followup("start")
    await slow.started.wait()
    agent.steer("first steer")
    agent.steer("second steer")
    # The running step is not interrupted by a steer: it waits for a step boundary.
    assert not any(
        e.type == "user/message" and e.data["content"] == "first steer"
        for e in agent.session.events
    )
    # Interrupting keeps the queued steers; once the cancelled turn converges they are replayed,
    # both claimed by the first step of the next turn (several steers cost one step).
    agent.cancel("user", keep_inbox=True)
    await agent.when_idle()
    turns = [e for e in agent.session.events if e.type == "turn/start"]
    assert len(turns) == 2
    second = agent.session.events[turns[1].seq :]
    claimed = [
        e.data["content"]
        for e in second
        if e.type == "user/message" and e.data["source"].get("kind") == "user"  # type: ignore[union-attr]
    ]
    assert claimed == ["first steer", "second steer"]
    assert sum(1 for e in second if e.type == "step/start") == 1
    assert agent.last_result is not None and agent.last_result.output == "after steering"


async def test_a_running_driver_is_owned_by_the_runtime_and_stopped_at_close(
    tmp_path: Any,
) -> None:
    kernel, agent, slow = compose([{"tool_calls": [{"name": "slow", "arguments": {}}]}], tmp_path)
    agent.followup("go")
    await slow.started.wait()
    assert agent.status == "running"
    assert len(kernel.runtime.tasks) == 1
    await kernel.aclose()
    assert agent.status == "idle"
    assert len(kernel.runtime.tasks) == 0


async def test_turn_end_and_text_notices_carry_the_agent(tmp_path: Any) -> None:
    kernel, agent, _ = compose([{"text": "hello there"}], tmp_path)
    ended: list[TurnEnded] = []
    streamed: list[StreamedText] = []
    kernel.ctx.on(TURN_END, ended.append)
    kernel.ctx.on(TEXT_DELTA, streamed.append, scope=agent)
    result = await agent.run("hi")
    assert ended == [(agent, result)]
    assert ended[0].agent is agent and ended[0].result is result
    assert "".join(s.text for s in streamed) == "hello there"
    assert {id(s.agent) for s in streamed} == {id(agent)}


async def test_an_agent_knows_its_owner_from_the_registry(tmp_path: Any) -> None:
    kernel, parent, _ = compose([], tmp_path)
    store = kernel.ctx.get(SESSIONS_SERVICE)
    child = Agent(kernel.ctx, store.create(), parent.options)
    assert child.owner is None  # no registry composed
    registry = AgentRegistry()
    kernel.ctx.provide(AGENTS_SERVICE, registry)
    registry.register(parent)
    registry.register(child, owner=parent)
    assert child.owner is parent
    assert parent.owner is None
