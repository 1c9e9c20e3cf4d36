"""Text the session log cannot store (not valid Unicode): a tool result of it becomes an error
result and the turn goes on; anywhere else the turn ends with the payload error's code, and
no committed event is lost."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from compose_support import compose_kernel
from event_support import kinds, plain
from tether._signals import AbortSignal
from tether.agent import Agent
from tether.agent._agent import AgentOptions
from tether.model import Completion, ModelRequest, ScriptedModel, StreamEvent, TextDelta
from tether.tools._base import ToolArgs, ToolCall, ToolResult


class RawListArgs(ToolArgs):
    pass


class RawList:
    """A tool as a plugin might write one: it lists a directory with ``os.listdir`` and
    returns the names as Python decoded them (undecodable bytes as lone surrogates)."""

    name = "raw_list"
    description = "List the directory."
    Args = RawListArgs

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    async def run(self, call: ToolCall) -> ToolResult:
        return ToolResult("\n".join(sorted(os.listdir(self.directory))))


def agent_with(tmp_path: Path, model: Any, *tools: Any) -> Agent:
    rig = compose_kernel(tmp_path, mode="workspace-write", approval="ask", tools=list(tools))
    return Agent(rig.ctx, rig.session(), AgentOptions(model), tools=rig.tools)


async def test_an_unstorable_tool_result_becomes_an_error_result_and_the_turn_goes_on(
    tmp_path: Path,
) -> None:
    listed = tmp_path / "listed"
    listed.mkdir()
    fd = os.open(os.fsencode(listed) + b"/\xff.txt", os.O_CREAT | os.O_WRONLY, 0o644)
    os.close(fd)
    model = ScriptedModel.from_dict(
        {
            "agents": [
                {
                    "match": {},
                    "steps": [
                        {"tool_calls": [{"name": "raw_list", "arguments": {}}]},
                        {"text": "carried on"},
                    ],
                }
            ]
        }
    )
    agent = agent_with(tmp_path, model, RawList(listed))
    result = await agent.run("list it")
    assert (result.stop_reason, result.output) == ("completed", "carried on")
    results = [plain(e) for e in agent.session.events if e.type == "tool/result"]
    assert results == [
        {
            "call_id": results[0]["call_id"],
            "name": "raw_list",
            "content": 'Error: the result of tool "raw_list" could not be recorded (tool/result: '
            "data.content: string contains a lone surrogate at index 0 (not valid Unicode)), so "
            "it was dropped; try the call another way (a narrower path or pattern, say)",
            "is_error": True,
        }
    ]
    assert kinds(agent)[-5:] == [
        "step/end",
        "step/start",
        "assistant/message",
        "step/end",
        "turn/end",
    ]


class UncheckedModel:
    """A model client that builds its completion around the stream types' checks (as a
    careless third-party adapter could, with ``object.__setattr__``)."""

    async def stream(
        self, request: ModelRequest, signal: AbortSignal | None = None
    ) -> Any:  # an async generator of StreamEvent
        yield TextDelta("fine")
        completion: StreamEvent = Completion(text="fine")
        object.__setattr__(completion, "text", "bad \ud800")
        yield completion


async def test_an_unstorable_reply_ends_the_turn_with_the_payload_code_and_keeps_the_log(
    tmp_path: Path, caplog: Any
) -> None:
    agent = agent_with(tmp_path, UncheckedModel())
    result = await agent.run("hi")
    assert result.stop_reason == "error"
    assert result.error == (
        "INVALID_PAYLOAD: assistant/message: data.content: string contains a lone surrogate at "
        "index 4 (not valid Unicode)"
    )
    assert kinds(agent)[-3:] == ["request/header", "step/end", "turn/end"]
    assert plain(agent.session.events[-2]) == {"step": 1, "reason": "interrupted"}
    assert [e.seq for e in agent.session.events] == list(range(len(agent.session.events)))
    assert not [r for r in caplog.records if r.exc_info], "no traceback is logged"
