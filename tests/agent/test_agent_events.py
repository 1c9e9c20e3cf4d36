"""The agent layer's event payloads (``agent/_events.py``): every definition reads back, key for
key and in the stored order, what the real agent wrote to a real store; a payload that does
not fit is refused with its exact message, and the lenient readers read it as they always
did."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from compose_support import FollowUpTool
from script_support import call
from tether import Harness
from tether.agent._compaction import SUMMARY_REQUEST
from tether.agent._events import (
    AssistantMessage,
    CompactFailed,
    ContextCompacted,
    InboxSpliced,
    InvalidAgentEventError,
    RequestHeader,
    StepClosed,
    StepOpened,
    ToolCalled,
    ToolResulted,
    TurnClosed,
    TurnOpened,
    UserMessage,
)
from tether.agent._history import history
from tether.model import Message, ToolCall, Usage
from tether.session import Event, JsonObject
from tether.session._events import SURFACE_EVENT_TYPES
from tether.session._json import thaw
from tether.session.persistence import open_persistence
from tether.session.persistence._repair import TOOL_OUTCOME_UNKNOWN, plan_repair

Definition = (
    TurnOpened
    | TurnClosed
    | StepOpened
    | StepClosed
    | RequestHeader
    | AssistantMessage
    | ToolCalled
    | ToolResulted
    | UserMessage
    | ContextCompacted
    | CompactFailed
    | InboxSpliced
)
DEFINITIONS: dict[str, type[Definition]] = {
    d.TYPE: d
    for d in (
        TurnOpened,
        TurnClosed,
        StepOpened,
        StepClosed,
        RequestHeader,
        AssistantMessage,
        ToolCalled,
        ToolResulted,
        UserMessage,
        ContextCompacted,
        CompactFailed,
        InboxSpliced,
    )
}
LINE = "lorem ipsum dolor sit amet\n"


def read_big() -> dict[str, Any]:
    return call("read", path="big.txt")


def summarise(text: str) -> dict[str, Any]:
    return {"text": text, "expect": re.escape(SUMMARY_REQUEST)}


async def stored_run(
    tmp_path: Path,
    name: str,
    steps: list[dict[str, Any]],
    prompts: list[str],
    *,
    window: int | None = None,
    **options: Any,
) -> list[Event]:
    """Run ``prompts`` on one root session and return its log as the store holds it."""
    workspace = tmp_path / name
    workspace.mkdir()
    (workspace / "big.txt").write_text(LINE * 900)
    (workspace / "AGENTS.md").write_text("Answer briefly.\n")
    script: dict[str, Any] = {"agents": [{"match": {"depth": 0}, "steps": steps}]}
    if window is not None:
        script["context_window"] = window
    (tmp_path / f"{name}.json").write_text(json.dumps(script))
    url = f"sqlite:///{tmp_path / f'{name}.db'}"
    async with Harness.open(
        workspace=workspace, model=f"scripted:{tmp_path / f'{name}.json'}", store=url, **options
    ) as harness:
        harness.tools.register(FollowUpTool())
        session_id = ""
        for prompt in prompts:
            session_id = (await harness.run(prompt)).session_id
    backend = open_persistence(url)
    try:
        return list((await backend.load(session_id)).events)
    finally:
        await backend.close()


async def real_logs(tmp_path: Path) -> list[Event]:
    compacted = await stored_run(
        tmp_path,
        "compacted",
        [
            read_big(),
            {"text": "Read it.", "reasoning": "the file is long"},
            read_big(),
            summarise("The user read big.txt twice."),
            {"text": "Read again."},
        ],
        ["read big.txt", "again"],
        window=12_000,
    )
    failed = await stored_run(
        tmp_path,
        "failed",
        [{"text": "Hello."}, read_big(), summarise("   "), {"text": "Read."}],
        ["hi", "read big.txt"],
        window=8_000,
    )
    limited = await stored_run(
        tmp_path,
        "limited",
        [call("follow_up"), {"text": "one"}, call("follow_up"), {"text": "x", "expect": "nope"}],
        ["start", "go on", "again"],
        max_turns=1,
    )
    stepped = await stored_run(
        tmp_path, "stepped", [call("follow_up"), {"text": "never"}], ["go"], max_steps=1
    )
    return [*compacted, *failed, *limited, *stepped]


async def test_every_stored_agent_event_reads_back_key_for_key(tmp_path: Path) -> None:
    events = await real_logs(tmp_path)
    seen: set[str] = set()
    for event in events:
        definition = DEFINITIONS.get(event.type)
        if definition is None:
            continue
        seen.add(event.type)
        read = definition.from_data(event.data)
        # Same keys in the same order: the JSON text of a log must not change.
        assert json.dumps(thaw(read.to_data())) == json.dumps(thaw(event.data)), event.type
        parse = getattr(definition, "parse", None)
        if parse is not None:
            assert parse(event.data) == read
    assert seen == set(DEFINITIONS)
    ends = {
        (e.data["reason"], "detail" in e.data, "error" in e.data)
        for e in events
        if e.type == TurnClosed.TYPE
    }
    assert ends == {("completed", False, False), ("error", False, True), ("max-steps", True, False)}
    assert StepClosed(1, "interrupted").to_data() in [thaw(e.data) for e in events]
    spliced = [InboxSpliced.from_data(e.data) for e in events if e.type == InboxSpliced.TYPE]
    assert InboxSpliced("next-turn", 0, removed_count=1) in spliced


ROUND_TRIPS: list[tuple[Definition, JsonObject]] = [
    (TurnOpened(3), {"turn": 3}),
    (
        TurnClosed(2, "aborted", cause="parent"),
        {"turn": 2, "reason": "aborted", "cause": "parent"},
    ),
    (TurnClosed(1, "interrupted"), {"turn": 1, "reason": "interrupted"}),
    (StepOpened(1), {"step": 1}),
    (StepClosed(2), {"step": 2}),
    (
        RequestHeader("sys", ("read",), "change"),
        {"header": {"system": "sys", "tools": ["read"]}, "reason": "change"},
    ),
    (
        AssistantMessage("", "tool_calls", Usage(5, 1), "", (ToolCall("c1", "read", "{}"),)),
        {
            "content": "",
            "reasoning": "",
            "tool_calls": [{"id": "c1", "name": "read", "arguments": "{}"}],
            "finish_reason": "tool_calls",
            "usage": {"prompt_tokens": 5, "completion_tokens": 1},
        },
    ),
    (UserMessage("hi", {"kind": "user"}), {"content": "hi", "source": {"kind": "user"}}),
    (
        InboxSpliced("inject", 2, inserted=1),
        {"target": "inject", "start": 2, "inserted": 1},
    ),
]


@pytest.mark.parametrize(("definition", "data"), ROUND_TRIPS)
def test_a_definition_writes_the_stored_layout_and_reads_it_back(
    definition: Definition, data: JsonObject
) -> None:
    assert json.dumps(definition.to_data()) == json.dumps(data)
    op = "append" if definition.TYPE in SURFACE_EVENT_TYPES else None
    stored = Event.make(definition.TYPE, 0, 0, definition.to_data(), surface_op=op)
    assert type(definition).from_data(stored.data) == definition


def test_the_crash_repairs_closers_fit_the_definitions() -> None:
    # The session layer spells these payloads itself (it sits below the agent layer); they
    # must stay payloads the definitions read.
    events = [
        Event.make(TurnOpened.TYPE, 0, 0, TurnOpened(4).to_data()),
        Event.make(StepOpened.TYPE, 1, 0, StepOpened(2).to_data()),
        Event.make(ToolCalled.TYPE, 2, 0, ToolCalled("c9", "bash", "{}").to_data()),
    ]
    closers, _ = plan_repair(events)
    read = [DEFINITIONS[e.type].from_data(e.data) for e in closers]
    assert read == [
        ToolResulted("c9", "bash", TOOL_OUTCOME_UNKNOWN, True),
        StepClosed(2, "interrupted"),
        TurnClosed(4, "interrupted"),
    ]


REFUSALS: list[tuple[type[Definition], JsonObject, str]] = [
    (TurnOpened, {"turn": "1"}, "turn/start payload: 'turn' must be an integer, got '1'"),
    (TurnOpened, {"turn": True}, "turn/start payload: 'turn' must be an integer, got True"),
    (
        TurnClosed,
        {"turn": 1, "reason": "done"},
        "turn/end payload: reason 'done' is not a turn end reason (accepted: aborted, blocked, "
        "completed, error, interrupted, max-steps, max-tokens)",
    ),
    (
        TurnClosed,
        {"turn": 1, "reason": "aborted", "cause": 7},
        "turn/end payload: 'cause' must be a string, got 7",
    ),
    (
        StepClosed,
        {"step": 1, "reason": "crash"},
        "step/end payload: reason 'crash' is not 'interrupted'",
    ),
    (
        RequestHeader,
        {"header": {"system": "s", "tools": [1]}, "reason": "initial"},
        "request/header payload: 'tools' must be a list of tool names, got [1]",
    ),
    (
        RequestHeader,
        {"header": {"system": "s", "tools": []}, "reason": "later"},
        "request/header payload: reason 'later' is not one of change, initial, resume",
    ),
    (
        AssistantMessage,
        {"content": "x", "finish_reason": "done", "usage": {}},
        "assistant/message payload: finish_reason 'done' is not a finish reason "
        "(accepted: error, length, stop, tool_calls)",
    ),
    (
        AssistantMessage,
        {"content": "x", "finish_reason": "stop", "usage": {"prompt_tokens": 1}},
        "assistant/message payload: 'completion_tokens' must be an integer, got None",
    ),
    (
        AssistantMessage,
        {"content": "x", "finish_reason": "stop", "usage": {}, "tool_calls": ["c"]},
        "assistant/message payload: 'tool_calls' must be a list of objects, got ['c']",
    ),
    (
        ToolCalled,
        {"call_id": "c", "name": "n"},
        "tool/call payload: 'arguments' must be a string, got None",
    ),
    (
        ToolResulted,
        {"call_id": "c", "name": "n", "content": "", "is_error": 1},
        "tool/result payload: 'is_error' must be a boolean, got 1",
    ),
    (
        UserMessage,
        {"content": "hi", "source": "user"},
        "user/message payload: 'source' must be an object, got 'user'",
    ),
    (
        ContextCompacted,
        {"trigger": "auto", "first_seq": 1, "last_seq": 2, "kept_seqs": ["3"]},
        "context/compacted payload: 'kept_seqs' must be a list of seqs, got ['3']",
    ),
    (
        CompactFailed,
        {"trigger": "cron"},
        "context/compact-failed payload: trigger 'cron' is not one of auto, manual",
    ),
    (
        InboxSpliced,
        {"target": "later", "start": 0, "inserted": 1},
        "agent/inbox/spliced payload: target 'later' is not an inbox queue "
        "(accepted: inject, next-step, next-turn)",
    ),
    (
        InboxSpliced,
        {"target": "inject", "start": 0, "inserted": 1, "removed_count": 1},
        "agent/inbox/spliced payload: exactly one of 'inserted' and 'removed_count' is stored",
    ),
]


@pytest.mark.parametrize(("definition", "data", "message"), REFUSALS)
def test_a_payload_that_does_not_fit_is_refused_with_its_message(
    definition: type[Definition], data: JsonObject, message: str
) -> None:
    with pytest.raises(InvalidAgentEventError) as info:
        definition.from_data(data)
    assert info.value.code == "INVALID_AGENT_EVENT"
    assert str(info.value) == message


def test_the_lenient_readers_read_a_malformed_payload_as_its_empty_values() -> None:
    assert TurnOpened.parse({"turn": "1"}) is None
    assert TurnClosed.parse({"turn": 1, "reason": "done"}) is None
    assert RequestHeader.parse({"header": "sys", "reason": "initial"}) is None
    assert TurnClosed.parse({"turn": "x", "reason": "error", "error": 5}) == TurnClosed(
        0, "error", None, "5"
    )
    assert RequestHeader.parse({"header": {"system": "s", "tools": "t"}}) == RequestHeader(
        "s", (), "change"
    )
    assert AssistantMessage.parse(
        {"content": 3, "finish_reason": "done", "usage": [], "tool_calls": [{"id": 1}, "x"]}
    ) == AssistantMessage("3", "error", Usage(), None, (ToolCall("1", "None", "None"),))
    assert ToolCalled.parse({"name": None, "arguments": {"a": 1}}) == ToolCalled("", "", "")
    assert ToolResulted.parse({"call_id": "c", "content": None, "is_error": 1}) == ToolResulted(
        "c", "", "", True
    )
    assert UserMessage.parse({"content": "hi", "source": "user"}) == UserMessage("hi", {})
    assert ContextCompacted.parse({"trigger": "cron", "kept_seqs": [2, "3"]}) == ContextCompacted(
        "manual", 0, -1, (2,), "", 0, 0, None, Usage()
    )
    assert CompactFailed.parse({"replied": "yes"}) == CompactFailed("manual", "", False, 0, None)


def test_the_history_replays_a_malformed_log_without_failing() -> None:
    # Old and hand-edited logs replay as they always did: a field that does not fit is empty.
    events = [
        Event.make(UserMessage.TYPE, 0, 0, {"content": "hi"}, surface_op="append"),
        Event.make(
            AssistantMessage.TYPE,
            1,
            0,
            {"content": None, "tool_calls": [{"id": "c1", "name": "read", "arguments": "{}"}]},
            surface_op="append",
        ),
        Event.make(ToolResulted.TYPE, 2, 0, {"call_id": "c1", "content": 5}, surface_op="append"),
        Event.make(ContextCompacted.TYPE, 3, 0, {"summary": 1}),
    ]
    assert history(events) == [
        Message.user("hi"),
        Message.assistant("", tool_calls=(ToolCall("c1", "read", "{}"),)),
        Message.tool("c1", "5"),
    ]
