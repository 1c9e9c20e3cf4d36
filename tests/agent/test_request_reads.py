"""A model request reads the events appended since the one before, not the log: a turn of a
session at event 10,000 reads exactly as many events as the same turn at event 100.

Every read of a session's log goes through its ``events`` view; the view here counts the
events it hands out (by index, by slice, by iteration, forwards or backwards). The session
runs in the real composition (sandbox policy, approvals, presets, file tools, a SQLite store,
the project instructions, a context window so each request is estimated) with the scripted
model, and a turn with one tool call is counted once the session holds about 100 events and
again once it holds about 10,000.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import overload

from cli_support import sqlite_store
from tether import Harness
from tether.agent import Agent
from tether.model import ScriptedModel
from tether.session import Event, EventLog, Session

TURN = [
    {"tool_calls": [{"name": "read", "arguments": {"path": "notes.txt"}}]},
    {"text": "Read it."},
]


class CountingLog(EventLog):
    """A session's ``events`` view that counts every event it hands out."""

    __slots__ = ("reads",)

    def __init__(self, events: list[Event]) -> None:
        super().__init__(events)
        self.reads = 0

    @overload
    def __getitem__(self, index: int) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Event, ...]: ...
    def __getitem__(self, index: int | slice) -> Event | tuple[Event, ...]:
        got = super().__getitem__(index)
        if isinstance(got, Event):
            self.reads += 1
            return got
        self.reads += len(got)
        return tuple(got)

    def __iter__(self) -> Iterator[Event]:
        for event in super().__iter__():
            self.reads += 1
            yield event

    def __reversed__(self) -> Iterator[Event]:
        for event in super().__reversed__():
            self.reads += 1
            yield event


def count_reads(session: Session) -> CountingLog:
    # The view is how the session hands out its list; this one shares the same list.
    counting = CountingLog(session._events)  # the session's own list, not a copy
    session.view = counting
    return counting


def pad(session: Session, turns: int) -> None:
    """``turns`` finished turns of eight events each, as a long session holds them (each
    with one model reply, so the scripted model's next step is two further on per turn)."""
    for _ in range(turns):
        turn = 1_000  # no reader takes the number from a padded turn
        session.append("turn/start", {"turn": turn})
        session.append("step/start", {"step": 1})
        user = {"content": "look again", "source": {"kind": "user"}}
        session.append("user/message", user, surface_op="append")
        call = {"id": "c1", "name": "read", "arguments": '{"path": "notes.txt"}'}
        reply = {
            "content": "",
            "tool_calls": [call],
            "finish_reason": "tool_calls",
            "usage": {"prompt_tokens": 500, "completion_tokens": 10},
        }
        session.append("assistant/message", reply, surface_op="append")
        session.append("tool/call", {"call_id": "c1", "name": "read", "arguments": "{}"})
        result = {"call_id": "c1", "name": "read", "content": "notes", "is_error": False}
        session.append("tool/result", result, surface_op="append")
        session.append("step/end", {"step": 1})
        session.append("turn/end", {"turn": turn, "reason": "completed"})


async def reads_of_one_turn(harness: Harness, root: Agent, counting: CountingLog) -> int:
    """The events read while the root runs one turn with one ``read`` call; the turn
    appends the same events whatever the log holds before it."""
    before, start = counting.reads, len(root.session)
    result = await harness.run("read the notes again")
    await harness.store.flush(root.session)
    assert result.stop_reason == "completed" and result.output == "Read it."
    appended = [e.type for e in root.session.events[start:]]
    assert appended.count("tool/result") == 1 and appended.count("request/header") == 0
    return counting.reads - before


async def test_a_turn_reads_as_many_events_at_event_10000_as_at_event_100(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("notes\n")
    (workspace / "AGENTS.md").write_text("Be brief.\n")
    # Enough steps for the padded replies too: each request takes the step its log's replies
    # say (docs/design.md §6).
    script = {"context_window": 10**9, "agents": [{"match": {}, "steps": TURN * 700}]}
    model = ScriptedModel.from_dict(script)
    async with Harness.open(workspace=workspace, model=model, store=sqlite_store(tmp_path)) as h:
        first = await h.run("read the notes")
        assert first.stop_reason == "completed"
        root = h.root
        assert root is not None
        counting = count_reads(root.session)
        pad(root.session, 10)
        await h.run("read the notes again")  # the folds catch up with the padding once
        at_100 = len(root.session)
        reads_at_100 = await reads_of_one_turn(h, root, counting)

        pad(root.session, 1240)
        await h.run("read the notes again")
        at_10000 = len(root.session)
        reads_at_10000 = await reads_of_one_turn(h, root, counting)

    assert 100 <= at_100 < 200 and 10_000 <= at_10000 < 10_200
    # The store hands each new event to its writer and its listeners, the folds read each
    # new event once: a few reads for each of the turn's events, none of the older ones.
    assert 0 < reads_at_100 < 100
    assert reads_at_10000 == reads_at_100, (reads_at_100, reads_at_10000)
