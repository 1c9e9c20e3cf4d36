"""Context that fits: automatic compaction under a small window, what the model is sent
afterwards, the permission events and the scope untouched, a cold resume, the failure paths
and ``Harness.compact``."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from cli_support import sqlite_store
from tether import Harness
from tether._signals import AbortSignal
from tether.agent._compaction import COMPACT_AT, SUMMARY_REQUEST, SUMMARY_SYSTEM, CompactionError
from tether.agent._history import SUMMARY_HEAD
from tether.agent._instructions import is_instructions
from tether.model import Completion, Message, ModelRequest, ScriptedModel, StreamEvent
from tether.policy._approval import APPROVAL_SERVICE, fold_approval_policy
from tether.policy._sandbox_policy import fold_sandbox_mode
from tether.session import Event, Session
from tether.session._json import thaw
from tether.tools._base import ToolArgs, ToolCall, ToolResult

LINE = "lorem ipsum dolor sit amet\n"
BIG = LINE * 900
"""What ``big.txt`` holds: 24,300 bytes, about 6,000 tokens once read."""
SUMMARY = "The user asked to read big.txt; it holds one repeated line."
PERMISSION_TYPES = ("permission/preset", "sandbox/mode", "approval/policy")


class Recording:
    """The scripted model, with every request it was sent and every completion it gave."""

    def __init__(self, inner: ScriptedModel) -> None:
        self.inner = inner
        self.context_window = inner.context_window
        self.requests: list[ModelRequest] = []
        self.completions: list[Completion] = []

    async def stream(
        self, request: ModelRequest, signal: AbortSignal | None = None
    ) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        async for item in self.inner.stream(request, signal):
            if isinstance(item, Completion):
                self.completions.append(item)
            yield item


def read_big() -> dict[str, Any]:
    return {"tool_calls": [{"name": "read", "arguments": {"path": "big.txt"}}]}


def summarise(text: str = SUMMARY) -> dict[str, Any]:
    return {"text": text, "expect": re.escape(SUMMARY_REQUEST)}


def model(tmp_path: Path, window: int, steps: list[dict[str, Any]]) -> Recording:
    path = tmp_path / "script.json"
    path.write_text(
        json.dumps({"context_window": window, "agents": [{"match": {"depth": 0}, "steps": steps}]})
    )
    return Recording(ScriptedModel.from_path(path))


def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir(exist_ok=True)
    (path / "big.txt").write_text(BIG)
    return path


def of_type(session: Session, event_type: str) -> list[Event]:
    return [e for e in session.events if e.type == event_type]


def seq_of(session: Session, event_type: str, **data: Any) -> int:
    return next(
        e.seq
        for e in session.events
        if e.type == event_type and all(e.data.get(k) == v for k, v in data.items())
    )


def snapshot_seq(session: Session) -> int:
    return next(
        e.seq
        for e in reversed(session.events)
        if e.type == "user/message" and thaw(e.data["source"]).get("form") == "snapshot"
    )


def layout(messages: list[Message] | tuple[Message, ...]) -> list[tuple[str, str]]:
    """Each message as ``(role, what)``: its content, or the tool calls it asks for."""
    out = []
    for m in messages:
        what = m.content if not m.tool_calls else " ".join(c.name for c in m.tool_calls)
        out.append((m.role, what))
    return out


# Two turns, each reading big.txt: the second turn's second request reaches 85 % of 12,000.
TWO_TURNS = [read_big(), {"text": "Read it."}, read_big(), summarise(), {"text": "Read again."}]


async def test_a_request_that_would_overflow_compacts_the_older_turns_first(
    tmp_path: Path,
) -> None:
    recording = model(tmp_path, 12_000, TWO_TURNS)
    async with Harness.open(
        workspace=workspace(tmp_path), model=recording, store=sqlite_store(tmp_path)
    ) as harness:
        first = await harness.run("read big.txt")
        second = await harness.run("again")
        session = harness.store.get(second.session_id)
    assert session is not None
    assert (first.stop_reason, second.stop_reason, second.output) == (
        "completed",
        "completed",
        "Read again.",
    )
    [compacted] = of_type(session, "context/compacted")
    data = thaw(compacted.data)
    turn_two = seq_of(session, "turn/start", turn=2)
    summary_request, summary_reply = recording.requests[3], recording.completions[3]
    assert list(data) == [
        "trigger",
        "first_seq",
        "last_seq",
        "kept_seqs",
        "summary",
        "tokens_before",
        "tokens_after",
        "context_window",
        "usage",
    ]
    assert {k: v for k, v in data.items() if not k.startswith("tokens_")} == {
        "trigger": "auto",
        "first_seq": seq_of(session, "user/message", content="read big.txt"),
        "last_seq": turn_two - 1,
        "kept_seqs": [snapshot_seq(session)],
        "summary": SUMMARY,
        "context_window": 12_000,
        "usage": {
            "prompt_tokens": summary_reply.usage.prompt_tokens,
            "completion_tokens": summary_reply.usage.completion_tokens,
        },
    }
    assert data["tokens_before"] >= int(12_000 * COMPACT_AT) > data["tokens_after"]
    # The event lies between the second turn's tool result and its next reply.
    assert [e.type for e in session.events[compacted.seq - 3 : compacted.seq + 2]] == [
        "tool/result",
        "step/end",
        "step/start",
        "context/compacted",
        "assistant/message",
    ]

    # The summarising request: its own instruction, the first turn as the model saw it, the ask.
    first_turn = [*recording.requests[1].messages[1:], recording.completions[1].to_message()]
    assert summary_request.messages[0] == Message.system(SUMMARY_SYSTEM)
    assert list(summary_request.messages[1:-1]) == first_turn
    assert summary_request.messages[-1] == Message.user(SUMMARY_REQUEST)
    assert summary_request.tools == ()

    # The next request: the summary, the kept runtime context, then the second turn as usual.
    after = recording.requests[4]
    snapshot = session.events[snapshot_seq(session)].data["content"]
    assert after.messages[0] == recording.requests[0].messages[0]
    assert layout(after.messages[1:]) == [
        ("user", f"{SUMMARY_HEAD}\n\n{SUMMARY}"),
        ("user", snapshot),
        ("user", "again"),
        ("assistant", "read"),
        ("tool", recording.requests[1].messages[-1].content),
    ]


async def test_the_conversation_goes_on_after_compaction(tmp_path: Path) -> None:
    recording = model(tmp_path, 12_000, [*TWO_TURNS, {"text": "Still here."}])
    async with Harness.open(
        workspace=workspace(tmp_path), model=recording, store=sqlite_store(tmp_path)
    ) as harness:
        await harness.run("read big.txt")
        await harness.run("again")
        third = await harness.run("are you there?")
        session = harness.store.get(third.session_id)
    assert session is not None
    assert (third.stop_reason, third.output) == ("completed", "Still here.")
    assert len(of_type(session, "context/compacted")) == 1
    before, last = recording.requests[4], recording.requests[5]
    assert list(last.messages) == [
        *before.messages,
        recording.completions[4].to_message(),
        Message.user("are you there?"),
    ]


async def test_permission_events_stay_and_a_cold_resume_folds_and_sends_the_same(
    tmp_path: Path,
) -> None:
    steps = [*TWO_TURNS, {"text": "Resumed."}]
    recording = model(tmp_path, 12_000, steps)
    async with Harness.open(
        workspace=workspace(tmp_path),
        model=recording,
        store=sqlite_store(tmp_path),
        sandbox="read-only",
        approval="ask",
    ) as harness:
        first = await harness.run("read big.txt")
        root = harness.agents.get(first.session_id)
        assert root is not None
        # A switch between the turns lies inside the range the summary replaces.
        harness.ctx.require(APPROVAL_SERVICE).set_approval_policy(root.session, "never")
        permissions = [e for e in root.session.events if e.type in PERMISSION_TYPES]
        await harness.run("again")
        session = root.session
        [compacted] = of_type(session, "context/compacted")
        switch = permissions[-1].seq
        assert compacted.data["first_seq"] < switch < compacted.data["last_seq"]
        assert [e for e in session.events if e.type in PERMISSION_TYPES] == permissions
        scope = (fold_sandbox_mode(session.events), fold_approval_policy(session.events))
        assert (scope[0].value if scope[0] else None, scope[1].value if scope[1] else None) == (
            "read-only",
            "never",
        )
    sent_before = [*recording.requests[4].messages, recording.completions[4].to_message()]

    resumed = Recording(ScriptedModel.from_path(tmp_path / "script.json"))
    async with Harness.open(
        workspace=workspace(tmp_path), model=resumed, store=sqlite_store(tmp_path)
    ) as harness:
        result = await harness.run("resumed?", resume=first.session_id)
        events = harness.agents.get(first.session_id).session.events  # type: ignore[union-attr]
        assert (fold_sandbox_mode(events), fold_approval_policy(events)) == scope
        assert [e for e in events if e.type in PERMISSION_TYPES] == permissions
    assert (result.stop_reason, result.output) == ("completed", "Resumed.")
    [request] = resumed.requests
    assert list(request.messages) == [*sent_before, Message.user("resumed?")]


async def test_a_long_first_turn_compacts_its_older_steps_without_parting_a_call(
    tmp_path: Path,
) -> None:
    recording = model(tmp_path, 14_000, [read_big(), read_big(), summarise(), {"text": "Done."}])
    async with Harness.open(
        workspace=workspace(tmp_path), model=recording, store=sqlite_store(tmp_path)
    ) as harness:
        result = await harness.run("read big.txt twice")
        session = harness.store.get(result.session_id)
    assert session is not None
    assert (result.stop_reason, result.output) == ("completed", "Done.")
    [compacted] = of_type(session, "context/compacted")
    replies = of_type(session, "assistant/message")
    first, last = compacted.data["first_seq"], compacted.data["last_seq"]
    assert (first, last, compacted.data["kept_seqs"]) == (replies[0].seq, replies[1].seq - 1, ())
    inside = session.events[first : last + 1]
    calls = {e.data["call_id"] for e in inside if e.type == "tool/call"}
    results = {e.data["call_id"] for e in inside if e.type == "tool/result"}
    assert calls == results and len(calls) == 1
    snapshot = session.events[snapshot_seq(session)].data["content"]
    assert layout(recording.requests[3].messages[1:]) == [
        ("user", "read big.txt twice"),
        ("user", snapshot),
        ("user", f"{SUMMARY_HEAD}\n\n{SUMMARY}"),
        ("assistant", "read"),
        ("tool", recording.requests[1].messages[-1].content),
    ]


# A small first turn, then a second whose read makes the next request pass 85 %.
def short_then_read(answer: str) -> list[dict[str, Any]]:
    return [{"text": "Hello."}, read_big(), summarise(answer), {"text": "Read."}]


async def test_a_failed_summary_lets_a_request_that_still_fits_go_on(tmp_path: Path) -> None:
    recording = model(tmp_path, 8_000, short_then_read("   "))
    async with Harness.open(
        workspace=workspace(tmp_path), model=recording, store=sqlite_store(tmp_path)
    ) as harness:
        await harness.run("hi")
        result = await harness.run("read big.txt")
        session = harness.store.get(result.session_id)
    assert session is not None
    assert (result.stop_reason, result.output) == ("completed", "Read.")
    assert of_type(session, "context/compacted") == []
    [failed] = of_type(session, "context/compact-failed")
    data = thaw(failed.data)
    assert {k: v for k, v in data.items() if k != "tokens_before"} == {
        "trigger": "auto",
        "error": "the model answered with an empty summary",
        "replied": True,
        "context_window": 8_000,
    }
    assert list(data) == ["trigger", "error", "replied", "tokens_before", "context_window"]
    assert int(8_000 * COMPACT_AT) <= data["tokens_before"] < 8_000
    # Nothing replaced: the request after the failed summary extends the one before it.
    before, after = recording.requests[1].messages, recording.requests[3].messages
    assert list(after[:-1]) == [*before, recording.completions[1].to_message()]
    assert after[-1].role == "tool" and after[-1].content.startswith(LINE * 3)
    assert all(SUMMARY_HEAD not in m.content for m in after)


async def test_a_failed_summary_ends_a_request_that_does_not_fit_with_context_overflow(
    tmp_path: Path,
) -> None:
    recording = model(tmp_path, 7_000, short_then_read(" "))
    async with Harness.open(
        workspace=workspace(tmp_path), model=recording, store=sqlite_store(tmp_path)
    ) as harness:
        await harness.run("hi")
        result = await harness.run("read big.txt")
        session = harness.store.get(result.session_id)
    assert session is not None
    [failed] = of_type(session, "context/compact-failed")
    tokens = failed.data["tokens_before"]
    assert tokens >= 7_000
    error = (
        f"CONTEXT_OVERFLOW: the next request needs about {tokens} tokens, more than the "
        "model's context window of 7000, and compaction did not help (COMPACTION_FAILED: the "
        "model did not summarise the conversation: the model answered with an empty summary); "
        "start a new session, or configure a larger context_window for this model "
        "(docs/models.md)"
    )
    assert (result.stop_reason, result.error) == ("error", error)
    assert [thaw(e.data) for e in of_type(session, "turn/end")][-1] == {
        "turn": 2,
        "reason": "error",
        "error": error,
    }
    assert len(recording.requests) == 3  # no request was sent after the failed summary


async def test_harness_compact_summarises_everything_between_runs(tmp_path: Path) -> None:
    recording = model(tmp_path, 100_000, [{"text": "Hello."}, summarise()])
    async with Harness.open(
        workspace=workspace(tmp_path), model=recording, store=sqlite_store(tmp_path)
    ) as harness:
        result = await harness.run("hi")
        event = await harness.compact()
        stored = await harness.store.inspect(result.session_id)
        session = harness.store.get(result.session_id)
    assert session is not None
    assert [e.to_dict() for e in stored.events] == [e.to_dict() for e in session.events]
    assert session.events[-1] == event
    assert (event.data["trigger"], event.data["first_seq"], event.data["last_seq"]) == (
        "manual",
        seq_of(session, "user/message", content="hi"),
        event.seq - 1,
    )
    assert event.data["kept_seqs"] == (snapshot_seq(session),)


async def test_the_project_instructions_are_never_summarised(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    (ws / "AGENTS.md").write_text("Always answer in English.\n")
    recording = model(tmp_path, 12_000, TWO_TURNS)
    async with Harness.open(workspace=ws, model=recording, store=sqlite_store(tmp_path)) as harness:
        await harness.run("read big.txt")
        result = await harness.run("again")
        session = harness.store.get(result.session_id)
    assert session is not None
    [instructions] = [e for e in session.events if is_instructions(e)]
    [compacted] = of_type(session, "context/compacted")
    assert instructions.seq < compacted.data["first_seq"]
    after = recording.requests[4].messages
    assert layout(after[1:3]) == [
        ("user", instructions.data["content"]),
        ("user", f"{SUMMARY_HEAD}\n\n{SUMMARY}"),
    ]
    assert "Always answer in English." in after[1].content


class CompactArgs(ToolArgs):
    pass


class CompactNowTool:
    """Asks its own agent to compact from inside a running turn."""

    name = "compact_now"
    description = "Compact the conversation."
    Args = CompactArgs

    async def run(self, call: ToolCall) -> ToolResult:
        agent: Any = call.agent
        try:
            await agent.compact()
        except CompactionError as err:
            return ToolResult(f"{err.code}: {err}", is_error=True)
        return ToolResult("compacted")


async def test_compact_during_a_turn_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    steps = [
        {"tool_calls": [{"name": "compact_now", "arguments": {}}]},
        {"text": "Refused.", "expect": "COMPACTION_BUSY"},
    ]
    recording = model(tmp_path, 100_000, steps)
    async with Harness.open(
        workspace=workspace(tmp_path), model=recording, store=sqlite_store(tmp_path)
    ) as harness:
        harness.tools.register(CompactNowTool())
        result = await harness.run("compact yourself")
        session = harness.store.get(result.session_id)
    assert session is not None
    assert (result.stop_reason, result.output) == ("completed", "Refused.")
    [outcome] = [e.data for e in session.events if e.type == "tool/result"]
    assert outcome["content"] == (
        f"COMPACTION_BUSY: agent {result.session_id} is running a turn; compact between turns "
        "(or cancel the turn first)"
    )
    assert of_type(session, "context/compacted") == of_type(session, "context/compact-failed") == []
    assert len(recording.requests) == 2


async def test_harness_compact_before_any_run_opens_no_session(tmp_path: Path) -> None:
    recording = model(tmp_path, 100_000, [{"text": "Hello."}])
    async with Harness.open(
        workspace=workspace(tmp_path), model=recording, store=sqlite_store(tmp_path)
    ) as harness:
        try:
            await harness.compact()
        except CompactionError as err:
            refused = (err.code, str(err))
        persistence = harness.store.persistence
        assert persistence is not None
        stored = await persistence.list()
    assert refused == (
        "NOTHING_TO_COMPACT",
        "this harness has no session yet: run a prompt first, or pass resume=ID",
    )
    assert (stored, harness.root, recording.requests) == ([], None, [])
