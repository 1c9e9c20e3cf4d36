"""The rules of compaction on exact logs: what a summary replaces and keeps, how the history
replays it, and the token estimate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tether.agent._compaction import CompactionPlan, estimate_tokens, plan_compaction
from tether.agent._history import SUMMARY_HEAD, Conversation, history
from tether.agent._instructions import INSTRUCTIONS_FORM, INSTRUCTIONS_PLUGIN
from tether.model import Message, ToolCall
from tether.session import Event, Session, SessionHeader

INSTRUCTIONS = {"kind": "plugin", "plugin": INSTRUCTIONS_PLUGIN, "form": INSTRUCTIONS_FORM}
SNAPSHOT = {"kind": "plugin", "plugin": "system-prompt", "form": "snapshot", "sections": []}
USER = {"kind": "user"}
CALL = {"id": "c1", "name": "read", "arguments": '{"path": "a"}'}


def log(*items: tuple[str, dict[str, Any]]) -> list[Event]:
    surface = ("user/message", "assistant/message", "tool/result")
    return [
        Event.make(kind, seq, seq, data, surface_op="append" if kind in surface else None)
        for seq, (kind, data) in enumerate(items)
    ]


def session_of(events: Sequence[Event]) -> Session:
    """A live session holding exactly ``events`` (as the agent's folds read it)."""
    session = Session(SessionHeader(id="s", created_at=0))
    for event in events:
        session.append(event.type, event.data, surface_op=event.surface_op)
    return session


def user(content: str, source: dict[str, Any] = USER) -> tuple[str, dict[str, Any]]:
    return "user/message", {"content": content, "source": source}


def reply(content: str, *, calls: bool = False, prompt: int = 0) -> tuple[str, dict[str, Any]]:
    data: dict[str, Any] = {"content": content, "finish_reason": "stop"}
    if calls:
        data["tool_calls"] = [CALL]
    data["usage"] = {"prompt_tokens": prompt, "completion_tokens": 3}
    return "assistant/message", data


# A forked child: the parent's turn as its seed, then its own instructions and snapshot, then
# its own turn with one tool call.
FORKED = log(
    user("seed prompt"),  # 0
    reply("seed answer"),  # 1
    ("session/end-seed", {}),  # 2
    user("rules", INSTRUCTIONS),  # 3
    ("turn/start", {"turn": 1}),  # 4
    user("child prompt"),  # 5
    user("runtime", SNAPSHOT),  # 6
    reply("", calls=True),  # 7
    ("tool/call", {"call_id": "c1", "name": "read", "arguments": "{}"}),  # 8
    ("tool/result", {"call_id": "c1", "name": "read", "content": "text"}),  # 9
)


def test_a_summary_replaces_the_older_turns_and_keeps_the_instructions_in_place() -> None:
    plan = plan_compaction(session_of(FORKED), turn_start=4)
    assert plan == CompactionPlan(first_seq=0, last_seq=3, kept_seqs=(3,))
    compacted = Event.make(
        "context/compacted",
        10,
        10,
        {"first_seq": 0, "last_seq": 3, "kept_seqs": [3], "summary": "S"},
    )
    assert history([*FORKED, compacted]) == [
        Message.user(f"{SUMMARY_HEAD}\n\nS"),
        Message.user("rules"),
        Message.user("child prompt"),
        Message.user("runtime"),
        Message.assistant("", tool_calls=[ToolCall("c1", "read", '{"path": "a"}')]),
        Message.tool("c1", "text"),
    ]
    assert Conversation.of([*FORKED, compacted]).replies_since(3) == 2


def test_between_turns_everything_is_summarised_but_the_kept_messages() -> None:
    assert plan_compaction(session_of(FORKED), turn_start=None) == CompactionPlan(0, 9, (3, 6))


def test_in_a_first_turn_the_boundary_is_its_latest_reply_and_its_prompt_is_kept() -> None:
    events = log(
        ("turn/start", {"turn": 1}),  # 0
        user("prompt"),  # 1
        reply("", calls=True),  # 2
        ("tool/result", {"call_id": "c1", "name": "read", "content": "one"}),  # 3
        user("a steer"),  # 4
        reply("", calls=True),  # 5
        ("tool/result", {"call_id": "c1", "name": "read", "content": "two"}),  # 6
    )
    assert plan_compaction(session_of(events), turn_start=0) == CompactionPlan(2, 4, (4,))
    # The latest reply alone is left: nothing older can be summarised.
    assert plan_compaction(session_of(events[:4]), turn_start=0) is None


def test_nothing_new_since_the_last_compaction_is_nothing_to_compact() -> None:
    compacted = Event.make(
        "context/compacted", 10, 10, {"first_seq": 0, "last_seq": 9, "kept_seqs": [3, 6]}
    )
    assert plan_compaction(session_of([*FORKED, compacted]), turn_start=None) is None


def test_the_estimate_is_the_last_usage_plus_a_quarter_of_the_bytes_since() -> None:
    events = log(
        user("hi"),
        reply("hello", prompt=1000),
        user("x" * 40),  # 40 bytes: 10 tokens
        user("é" * 3),  # 6 bytes: 2 tokens (rounded up)
    )
    assert estimate_tokens(Conversation.of(events), "system", []) == 1000 + 3 + 10 + 2
    # Without usage: the system prompt and every message, by bytes.
    # 14 bytes of system prompt, 2 of the empty tool list, 2 of "hi": 18 bytes, 5 tokens.
    assert estimate_tokens(Conversation.of(events[:1]), "s" * 14, []) == 5
