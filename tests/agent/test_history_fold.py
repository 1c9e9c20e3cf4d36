"""The model's view of a log is kept incrementally (``Session.fold``) and is exactly what a
fold of the whole log gives.

The oracles below are the rules as plain full-log folds (over the per-event mapping,
``to_message``), the way they read before the folds existed: the history, the model replies since a seed, the retained snapshot, the recorded
instructions, the token estimate and the compaction plan. Random logs (every surface and
log-only kind, runtime-context snapshots, instructions, well-formed and malformed
``context/compacted`` ranges, refused summaries, inbox splices, crash-repair closers) are
appended in random chunks, the folds read between chunks, and everything the agent and
compaction read is compared with its oracle, then again after a cold load of the same log.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether.agent._compaction import (
    BYTES_PER_TOKEN,
    CompactionPlan,
    estimate_tokens,
    plan_compaction,
)
from tether.agent._context_snapshot import is_snapshot, retained_snapshot
from tether.agent._events import (
    AssistantMessage,
    CompactFailed,
    ContextCompacted,
    UserMessage,
)
from tether.agent._history import Conversation, message_bytes, summary_message, to_message
from tether.agent._instructions import (
    INSTRUCTIONS_FORM,
    INSTRUCTIONS_PLUGIN,
    is_instructions,
    recorded_instructions,
)
from tether.model import Message, ToolSchema
from tether.session import Event, Session, SessionHeader
from tether.session._events import SURFACE_EVENT_TYPES

# -- the oracles: each rule as a fold over the whole log ----------------------------------------


def oracle_latest_compaction(events: Sequence[Event]) -> Event | None:
    for event in reversed(events):
        if event.type == ContextCompacted.TYPE:
            return event
    return None


def oracle_history(events: Sequence[Event]) -> list[Message]:
    latest = oracle_latest_compaction(events)
    compaction = ContextCompacted.parse(latest.data) if latest is not None else None
    messages: list[Message] = []
    for event in events:
        if (
            compaction is not None
            and compaction.first_seq <= event.seq <= compaction.last_seq
            and event.seq not in compaction.kept_seqs
        ):
            if event.seq == compaction.first_seq:
                messages.append(summary_message(compaction.summary))
            continue
        message = to_message(event)
        if message is not None:
            messages.append(message)
    return messages


def oracle_replies_since(events: Sequence[Event], start: int) -> int:
    return sum(
        1
        for e in events[start:]
        if e.type in (AssistantMessage.TYPE, ContextCompacted.TYPE)
        or (e.type == CompactFailed.TYPE and CompactFailed.parse(e.data).replied)
    )


def oracle_snapshot(events: Sequence[Event]) -> Event | None:
    return next((e for e in reversed(events) if is_snapshot(e)), None)


def oracle_instructions(events: Sequence[Event]) -> Event | None:
    return next((e for e in events if is_instructions(e)), None)


def oracle_tokens(byte_count: int) -> int:
    return -(-byte_count // BYTES_PER_TOKEN)


def oracle_estimate(events: Sequence[Event], system: str, tools: Sequence[ToolSchema]) -> int:
    compaction = oracle_latest_compaction(events)
    floor = compaction.seq if compaction is not None else -1
    for event in reversed(events):
        if event.seq <= floor:
            break
        if event.type != AssistantMessage.TYPE:
            continue
        usage = AssistantMessage.parse(event.data).usage
        prompt, completion = usage.prompt_tokens, usage.completion_tokens
        if prompt <= 0:
            break
        since = (to_message(e) for e in events[event.seq + 1 :])
        return prompt + completion + oracle_tokens(sum(message_bytes(m) for m in since if m))
    schemas = json.dumps(
        [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in tools]
    )
    fixed = len(system.encode("utf-8", "surrogatepass")) + len(schemas.encode("utf-8"))
    return oracle_tokens(fixed + sum(message_bytes(m) for m in oracle_history(events)))


def oracle_plan(events: Sequence[Event], turn_start: int | None) -> CompactionPlan | None:
    previous = oracle_latest_compaction(events)
    floor = previous.seq if previous is not None else -1
    visible_from = ContextCompacted.parse(previous.data).last_seq + 1 if previous else 0
    snapshots = [e.seq for e in events if is_snapshot(e)]
    snapshot = snapshots[-1] if snapshots else None
    if turn_start is None:
        tails: list[int] = [len(events)]
    else:
        replies = [e.seq for e in events[turn_start:] if e.type == AssistantMessage.TYPE]
        tails = [turn_start, *replies[-1:]]
    for tail in tails:
        if tail <= floor:
            continue
        kept = {
            e.seq
            for e in events[:tail]
            if is_instructions(e)
            or e.seq == snapshot
            or (turn_start is not None and e.seq > turn_start and e.type == UserMessage.TYPE)
        }
        summarised = [
            e.seq for e in events[:tail] if e.type in SURFACE_EVENT_TYPES and e.seq not in kept
        ]
        if not any(seq >= visible_from for seq in summarised):
            continue
        first, last = summarised[0], tail - 1
        return CompactionPlan(first, last, tuple(s for s in sorted(kept) if first <= s <= last))
    return None


# -- random logs --------------------------------------------------------------------------------

SNAPSHOT = {"kind": "plugin", "plugin": "system-prompt", "form": "snapshot", "sections": []}
INSTRUCTIONS = {"kind": "plugin", "plugin": INSTRUCTIONS_PLUGIN, "form": INSTRUCTIONS_FORM}
SOURCES = [{"kind": "user"}, SNAPSHOT, INSTRUCTIONS, {"kind": "subagent-settled"}]
TOOLS = [ToolSchema("read", "Read a file.", {"type": "object"})]
SYSTEM = "You are tether. é"

texts = st.text(alphabet="abé \n", max_size=12)

Item = tuple[str, dict[str, Any]]


user_messages = st.builds(
    lambda content, source: ("user/message", {"content": content, "source": source}),
    texts,
    st.sampled_from(SOURCES),
)
replies = st.builds(
    lambda content, calls, prompt, reasoning: (
        "assistant/message",
        {
            "content": content,
            **({"reasoning": reasoning} if reasoning is not None else {}),
            **({"tool_calls": [{"id": "c1", "name": "read", "arguments": "{}"}]} if calls else {}),
            "finish_reason": "stop",
            "usage": {"prompt_tokens": prompt, "completion_tokens": 3},
        },
    ),
    texts,
    st.booleans(),
    st.sampled_from([0, 0, 40, 900]),
    st.one_of(st.none(), texts),
)
results = st.builds(
    lambda content, is_error: (
        "tool/result",
        {"call_id": "c1", "name": "read", "content": content, "is_error": is_error},
    ),
    texts,
    st.booleans(),
)
compactions = st.builds(
    lambda first, span, offsets, summary, whole: (
        "context/compacted",
        {
            "trigger": "auto",
            "first_seq": first,
            "last_seq": first + span,
            # Kept seqs mostly in the range, some past the log's end (kept when they come).
            "kept_seqs": [first + offset for offset in offsets],
            "summary": summary,
            "tokens_before": 10,
            "tokens_after": 5,
            "context_window": 100,
            "usage": {"prompt_tokens": 1, "completion_tokens": 1},
        }
        if whole
        # Malformed, as a hand-edited log may be: the range reads as empty.
        else {"summary": summary, "kept_seqs": offsets},
    ),
    st.integers(min_value=0, max_value=40),
    st.integers(min_value=-3, max_value=40),
    st.lists(st.integers(min_value=0, max_value=45), max_size=5),
    texts,
    st.booleans(),
)
log_only = st.sampled_from(
    [
        ("turn/start", {"turn": 1}),
        ("turn/end", {"turn": 1, "reason": "completed"}),
        ("turn/end", {"turn": 1, "reason": "interrupted"}),
        ("step/start", {"step": 1}),
        ("step/end", {"step": 1, "reason": "interrupted"}),
        ("tool/call", {"call_id": "c1", "name": "read", "arguments": "{}"}),
        ("agent/inbox/spliced", {"target": "next-step", "start": 0, "inserted": 1}),
        ("agent/inbox/spliced", {"target": "next-turn", "start": 0, "removed_count": 2}),
        ("sandbox/mode", {"mode": "read-only", "source": "delegation"}),
        ("approval/policy", {"policy": "never"}),
        (
            "context/compact-failed",
            {"trigger": "auto", "error": "e", "replied": True, "tokens_before": 1},
        ),
        (
            "context/compact-failed",
            {"trigger": "manual", "error": "e", "replied": False, "tokens_before": 1},
        ),
        ("request/header", {"header": {"system": "s", "tools": []}, "reason": "initial"}),
    ]
)
items = st.one_of(user_messages, replies, results, log_only, compactions)
"""One event to append; a ``read`` flag after it says whether the folds are read there."""
logs = st.lists(st.tuples(items, st.booleans()), max_size=60)


def append(session: Session, item: Item) -> None:
    kind, data = item
    session.append(kind, data, surface_op="append" if kind in SURFACE_EVENT_TYPES else None)


def check_against_the_oracles(session: Session, probe: ContextCompacted) -> None:
    events = list(session.events)
    conversation = session.fold(Conversation)
    assert conversation.messages() == oracle_history(events)
    for start in (0, len(events) // 2, len(events)):
        assert conversation.replies_since(start) == oracle_replies_since(events, start)
    assert retained_snapshot(session) == oracle_snapshot(events)
    assert recorded_instructions(session) == oracle_instructions(events)
    assert estimate_tokens(conversation, SYSTEM, TOOLS) == oracle_estimate(events, SYSTEM, TOOLS)
    assert estimate_tokens(conversation, "", []) == oracle_estimate(events, "", [])
    turn = session.last("turn/start")
    for turn_start in (None, turn.seq if turn is not None else None):
        assert plan_compaction(session, turn_start) == oracle_plan(events, turn_start)
    compaction = oracle_latest_compaction(events)
    floor = compaction.seq if compaction is not None else 0
    for last in {floor, (floor + len(events)) // 2, len(events) - 1}:
        if last >= floor:
            assert conversation.messages_through(last) == oracle_history(events[: last + 1])
    provisional = Event.make(probe.TYPE, len(events), 0, probe.to_data())
    assert conversation.compacted_messages(probe) == oracle_history([*events, provisional])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(log=logs, probe=compactions, seed_length=st.integers(min_value=0, max_value=10))
def test_the_folds_are_what_a_fold_of_the_whole_log_gives(
    log: list[tuple[Item, bool]], probe: Item, seed_length: int
) -> None:
    probed = ContextCompacted.parse(probe[1])
    session = Session(SessionHeader(id="live", created_at=0))
    for item, read in log:
        append(session, item)
        if read:
            check_against_the_oracles(session, probed)
    check_against_the_oracles(session, probed)
    # A cold load (resume, crash repair, a fork's seed) folds the stored log from scratch.
    stored = list(session.events)
    cut = min(seed_length, len(stored))
    resumed = Session(
        SessionHeader(id="resumed", created_at=0, seed_length=cut or None), stored[:cut]
    )
    for event, (_, read) in zip(stored[cut:], log[cut:], strict=True):
        resumed.append(event.type, event.data, surface_op=event.surface_op)
        if read:
            check_against_the_oracles(resumed, probed)
    check_against_the_oracles(resumed, probed)


def compacted(first: int, last: int, kept: list[int]) -> Item:
    data = {"first_seq": first, "last_seq": last, "kept_seqs": kept, "summary": "S"}
    return "context/compacted", data


@pytest.mark.parametrize(
    "compaction",
    [
        compacted(1, 6, [4]),  # reaches past itself: 3 and 5 are hidden when they come, 4 kept
        compacted(3, 6, [3]),  # its first seq is kept: no summary at all
        compacted(2, 0, []),  # an empty range hides nothing
        compacted(4, 9, [9]),  # starts after itself: the summary comes at 4
    ],
)
def test_a_range_reaching_past_its_compaction_hides_what_comes_into_it(
    compaction: Item,
) -> None:
    session = Session(SessionHeader(id="s", created_at=0))
    append(session, ("user/message", {"content": "u0", "source": {"kind": "user"}}))
    append(session, ("user/message", {"content": "u1", "source": {"kind": "user"}}))
    append(session, compaction)
    assert session.fold(Conversation).messages() == oracle_history(list(session.events))
    for seq in range(3, 8):
        append(session, ("tool/result", {"call_id": "c1", "content": f"r{seq}"}))
        assert session.fold(Conversation).messages() == oracle_history(list(session.events))


def test_a_fold_that_fails_is_made_again_from_the_whole_log() -> None:
    class Fragile:
        fed: list[int]

        def __init__(self) -> None:
            self.fed = []

        def feed(self, event: Event) -> None:
            if event.type == "turn/end":
                raise ValueError("no")
            self.fed.append(event.seq)

    session = Session(SessionHeader(id="s", created_at=0))
    session.append("turn/start", {"turn": 1})
    first = session.fold(Fragile)
    assert first.fed == [0]
    session.append("step/start", {"step": 1})
    session.append("turn/end", {"turn": 1, "reason": "completed"})
    with pytest.raises(ValueError, match="no"):
        session.fold(Fragile)
    # The one that failed halfway (fed seq 1, not 2) is dropped, never read again.
    assert first.fed == [0, 1]
    session.append("turn/start", {"turn": 2})
    with pytest.raises(ValueError, match="no"):
        session.fold(Fragile)


def test_a_fold_is_read_once_per_event() -> None:
    class Counting:
        def __init__(self) -> None:
            self.fed: list[int] = []

        def feed(self, event: Event) -> None:
            self.fed.append(event.seq)

    session = Session(SessionHeader(id="s", created_at=0), [Event.make("turn/start", 0, 0)])
    counting = session.fold(Counting)
    assert counting.fed == [0, 1]  # the seed and its end-seed marker
    for turn in range(2, 5):
        session.append("turn/start", {"turn": turn})
    assert session.fold(Counting) is counting
    assert session.fold(Counting).fed == [0, 1, 2, 3, 4]
