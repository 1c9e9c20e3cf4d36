"""A conformance suite any persistence backend can run (needs pytest and pytest-asyncio).

Subclass :class:`PersistenceConformance` in a test module and say how to open your backend::

    from tether.session.persistence.conformance import PersistenceConformance

    class TestMyBackend(PersistenceConformance):
        def make_persistence(self, tmp_path):
            return MyBackend(tmp_path / "store")

``make_persistence`` may be called more than once in a test with the same ``tmp_path``: every
call must return a new, independent handle onto the same storage (that is how the suite checks
reopening and racing writers). It may return the backend or an awaitable of it.

Some checks need to damage stored data the way a crash or a newer writer would, which only the
backend knows how to do. They call optional hooks and are skipped when a hook is not
implemented (raises ``NotImplementedError``, the default); each hook may be sync or async:

- :meth:`corrupt_tail`: leave a torn final record, as a crash mid-write would;
- :meth:`corrupt_record`: damage one complete record in the middle of the log;
- :meth:`set_format_version`: make a stored header claim another format version;
- :meth:`storage_snapshot`: a value that changes whenever the stored bytes change.

Run ``pytest.register_assert_rewrite("tether.session.persistence.conformance")`` in your
``conftest.py`` for detailed assertion messages.

The contract checked here: ``create`` refuses a taken id; ``append`` is all-or-nothing and its
first event continues the stored length, else :class:`SeqConflictError` (also for a batch with
a gap and for a racing writer); ``load`` returns exactly what was appended, drops a torn tail,
refuses damage before the tail, refuses unknown required event types and other format versions,
and closes an interrupted turn durably (see :mod:`tether.session.persistence.repair`);
``inspect`` returns the same view and writes nothing; ``list`` returns every header, oldest
first, without reading events; ``close`` is idempotent.
"""

from __future__ import annotations

import asyncio
import inspect as _inspect
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
import pytest_asyncio

from tether.session.events import Event, UnknownEventTypeError
from tether.session.header import FormatVersionError, SessionHeader
from tether.session.persistence.base import (
    CorruptLogError,
    Persistence,
    SeqConflictError,
    SessionExistsError,
    SessionNotFoundError,
)
from tether.session.persistence.repair import TOOL_OUTCOME_UNKNOWN
from tether.session.session import has_open_turn

T0 = 1_700_000_000_000
"""Epoch ms used for the events and headers the suite writes."""

UNKNOWN_TYPE = "conformance/never-registered"
"""An event type no tether registers: stands for one a newer writer or a plugin added."""


def make_events(
    start: int, *specs: tuple[str, Mapping[str, Any]] | tuple[str, Mapping[str, Any], object]
) -> list[Event]:
    """Events with seqs ``start, start+1, ...`` from ``(type, data[, surface_op])`` specs.

    Surface events default to ``surface_op="append"``.
    """
    out: list[Event] = []
    for offset, spec in enumerate(specs):
        kind, data = spec[0], spec[1]
        surface_op = spec[2] if len(spec) == 3 else None
        if surface_op is None and kind in ("user/message", "assistant/message", "tool/result"):
            surface_op = "append"
        out.append(
            Event.make(kind, start + offset, T0 + start + offset, data, surface_op=surface_op)
        )
    return out


def titles(start: int, count: int) -> list[Event]:
    """``count`` between-turn ``session/title`` events from seq ``start`` (no turn to close)."""
    return make_events(
        start,
        *[("session/title", {"title": f"title {seq}"}) for seq in range(start, start + count)],
    )


def dicts(events: Sequence[Event]) -> list[dict[str, object]]:
    return [event.to_dict() for event in events]


def header(session_id: str = "s-1", created_at: int = T0, **fields: Any) -> SessionHeader:
    return SessionHeader(id=session_id, created_at=created_at, **fields)


def closed_turn(start: int, turn: int = 1) -> list[Event]:
    """A complete turn: user message, one step with a tool call and its result, reply."""
    call = f"call-{turn}"
    return make_events(
        start,
        ("turn/start", {"turn": turn}),
        ("user/message", {"content": f"question {turn}", "source": "user"}),
        ("step/start", {"step": 1}),
        ("tool/call", {"call_id": call, "name": "read", "arguments": '{"path": "a.txt"}'}),
        ("approval/asked", {"id": f"ap-{turn}", "tool_name": "read", "call_id": call}),
        ("approval/decided", {"id": f"ap-{turn}", "outcome": "allowed-once"}),
        ("tool/result", {"call_id": call, "name": "read", "content": "text", "is_error": False}),
        ("step/end", {"step": 1}),
        ("assistant/message", {"content": f"answer {turn}"}),
        ("turn/end", {"turn": turn, "reason": "completed"}),
    )


def interrupted_turn(start: int, turn: int = 2) -> list[Event]:
    """A turn cut off mid-step: two tool calls (one answered), an approval still asked."""
    return make_events(
        start,
        ("turn/start", {"turn": turn}),
        ("user/message", {"content": "go", "source": "user"}),
        ("step/start", {"step": 3}),
        ("tool/call", {"call_id": "c1", "name": "bash", "arguments": '{"cmd": "ls"}'}),
        ("tool/call", {"call_id": "c2", "name": "write", "arguments": '{"path": "x"}'}),
        ("tool/result", {"call_id": "c1", "name": "bash", "content": "a\nb", "is_error": False}),
        ("approval/asked", {"id": "ap-9", "tool_name": "write", "call_id": "c2"}),
    )


def expected_closers(start: int, turn: int = 2) -> list[dict[str, object]]:
    """What repair must append after :func:`interrupted_turn` (times are the last event's)."""
    time = T0 + start - 1
    return [
        {
            "type": "approval/decided",
            "seq": start,
            "time": time,
            "data": {"id": "ap-9", "outcome": "unavailable", "repaired": True},
        },
        {
            "type": "tool/result",
            "seq": start + 1,
            "time": time,
            "data": {
                "call_id": "c2",
                "name": "write",
                "content": TOOL_OUTCOME_UNKNOWN,
                "is_error": True,
            },
            "surface_op": "append",
        },
        {
            "type": "step/end",
            "seq": start + 2,
            "time": time,
            "data": {"step": 3, "reason": "interrupted"},
        },
        {
            "type": "turn/end",
            "seq": start + 3,
            "time": time,
            "data": {"turn": turn, "reason": "interrupted"},
        },
    ]


async def _maybe_await(value: object) -> Any:
    if _inspect.isawaitable(value):
        return await value
    return value


class PersistenceConformance:
    """Base class of a backend's conformance tests; override :meth:`make_persistence`."""

    pytestmark: ClassVar[list[pytest.MarkDecorator]] = [pytest.mark.asyncio]

    # -- hooks for the backend under test -------------------------------------------------
    def make_persistence(self, tmp_path: Path) -> Persistence | Awaitable[Persistence]:
        """A new handle onto the storage that lives under ``tmp_path``."""
        raise NotImplementedError("override make_persistence(tmp_path)")

    def corrupt_tail(self, persistence: Persistence, session_id: str) -> Awaitable[None] | None:
        """Leave an incomplete final record after the stored events (a crash mid-write)."""
        raise NotImplementedError

    def corrupt_record(
        self, persistence: Persistence, session_id: str, seq: int
    ) -> Awaitable[None] | None:
        """Make the stored event ``seq`` unreadable, keeping the records after it intact."""
        raise NotImplementedError

    def set_format_version(
        self, persistence: Persistence, session_id: str, version: int
    ) -> Awaitable[None] | None:
        """Make the stored header of ``session_id`` claim format ``version``."""
        raise NotImplementedError

    def storage_snapshot(self, persistence: Persistence) -> object:
        """A value equal between two calls exactly when no stored byte changed."""
        raise NotImplementedError

    # -- plumbing ------------------------------------------------------------------------
    async def open_handle(self, tmp_path: Path) -> Persistence:
        return await _maybe_await(self.make_persistence(tmp_path))  # type: ignore[no-any-return]

    async def _hook(self, name: str, *args: object) -> Any:
        try:
            return await _maybe_await(getattr(self, name)(*args))
        except NotImplementedError:
            pytest.skip(f"{type(self).__name__} does not implement {name}()")

    @pytest_asyncio.fixture
    async def persistence(self, tmp_path: Path) -> AsyncIterator[Persistence]:
        handle = await self.open_handle(tmp_path)
        try:
            yield handle
        finally:
            await handle.close()

    async def _stored(self, persistence: Persistence, events: Sequence[Event]) -> str:
        await persistence.create(header())
        await persistence.append("s-1", events)
        return "s-1"

    # -- create --------------------------------------------------------------------------
    async def test_implements_the_protocol(self, persistence: Persistence) -> None:
        assert isinstance(persistence, Persistence)

    async def test_create_then_load_is_empty(self, persistence: Persistence) -> None:
        await persistence.create(header(cwd="/work"))
        stored = await persistence.load("s-1")
        assert stored.header == header(cwd="/work")
        assert stored.events == ()
        assert not stored.repair.changed

    async def test_create_twice_raises_session_exists(self, persistence: Persistence) -> None:
        await persistence.create(header())
        with pytest.raises(SessionExistsError) as caught:
            await persistence.create(header(created_at=T0 + 5))
        assert caught.value.code == "SESSION_ALREADY_EXISTS"
        assert (await persistence.load("s-1")).header.created_at == T0

    async def test_create_race_between_handles_has_one_winner(
        self, persistence: Persistence, tmp_path: Path
    ) -> None:
        other = await self.open_handle(tmp_path)
        try:
            results = await asyncio.gather(
                persistence.create(header(created_at=T0)),
                other.create(header(created_at=T0 + 1)),
                return_exceptions=True,
            )
        finally:
            await other.close()
        errors = [r for r in results if isinstance(r, BaseException)]
        assert len(errors) == 1 and isinstance(errors[0], SessionExistsError)
        assert [h.id for h in await persistence.list()] == ["s-1"]

    # -- append --------------------------------------------------------------------------
    async def test_append_continues_stored_seq(self, persistence: Persistence) -> None:
        events = titles(0, 10)
        await self._stored(persistence, events[:3])
        await persistence.append("s-1", events[3:4])
        await persistence.append("s-1", events[4:])
        assert dicts((await persistence.load("s-1")).events) == dicts(events)

    async def test_append_empty_batch_is_a_no_op(self, persistence: Persistence) -> None:
        await self._stored(persistence, closed_turn(0))
        await persistence.append("s-1", [])
        assert dicts((await persistence.load("s-1")).events) == dicts(closed_turn(0))

    async def test_append_to_unknown_session_raises_not_found(
        self, persistence: Persistence
    ) -> None:
        with pytest.raises(SessionNotFoundError) as caught:
            await persistence.append("nope", closed_turn(0))
        assert caught.value.code == "SESSION_NOT_FOUND"

    async def test_append_with_gap_raises_seq_conflict(self, persistence: Persistence) -> None:
        events = titles(0, 10)
        await persistence.create(header())
        with pytest.raises(SeqConflictError):
            await persistence.append("s-1", events[1:3])
        await persistence.append("s-1", events[:2])
        with pytest.raises(SeqConflictError) as caught:
            await persistence.append("s-1", events[3:5])
        assert caught.value.code == "SEQ_CONFLICT"
        assert dicts((await persistence.load("s-1")).events) == dicts(events[:2])

    async def test_append_overlapping_stored_seq_raises_seq_conflict(
        self, persistence: Persistence
    ) -> None:
        events = titles(0, 10)
        await self._stored(persistence, events[:4])
        with pytest.raises(SeqConflictError):
            await persistence.append("s-1", events[2:6])
        with pytest.raises(SeqConflictError):
            await persistence.append("s-1", events[:1])
        assert dicts((await persistence.load("s-1")).events) == dicts(events[:4])

    async def test_append_non_contiguous_batch_stores_nothing(
        self, persistence: Persistence
    ) -> None:
        events = titles(0, 10)
        await self._stored(persistence, events[:2])
        with pytest.raises(SeqConflictError):
            await persistence.append("s-1", [events[2], events[4]])
        assert dicts((await persistence.load("s-1")).events) == dicts(events[:2])
        await persistence.append("s-1", events[2:])
        assert dicts((await persistence.load("s-1")).events) == dicts(events)

    async def test_racing_writers_exactly_one_wins(
        self, persistence: Persistence, tmp_path: Path
    ) -> None:
        events = titles(0, 10)
        await self._stored(persistence, events[:2])
        other = await self.open_handle(tmp_path)
        mine = events[2:5]
        theirs = make_events(2, ("session/title", {"title": "theirs"}))
        try:
            results = await asyncio.gather(
                persistence.append("s-1", mine),
                other.append("s-1", theirs),
                return_exceptions=True,
            )
        finally:
            await other.close()
        errors = [r for r in results if isinstance(r, BaseException)]
        assert len(errors) == 1 and isinstance(errors[0], SeqConflictError)
        winner = mine if results[0] is None else theirs
        assert dicts((await persistence.load("s-1")).events) == dicts([*events[:2], *winner])

    async def test_stale_handle_gets_seq_conflict_then_continues(
        self, persistence: Persistence, tmp_path: Path
    ) -> None:
        events = titles(0, 10)
        await self._stored(persistence, events[:2])
        other = await self.open_handle(tmp_path)
        try:
            await other.append("s-1", events[2:4])
        finally:
            await other.close()
        with pytest.raises(SeqConflictError):
            await persistence.append("s-1", events[2:3])
        await persistence.append("s-1", events[4:])
        assert dicts((await persistence.load("s-1")).events) == dicts(events)

    async def test_sessions_are_independent(self, persistence: Persistence) -> None:
        await persistence.create(header("a"))
        await persistence.create(header("b", T0 + 1))
        await persistence.append("a", closed_turn(0))
        await persistence.append("b", titles(0, 3))
        assert dicts((await persistence.load("a")).events) == dicts(closed_turn(0))
        assert dicts((await persistence.load("b")).events) == dicts(titles(0, 3))

    # -- load: exact round trip ----------------------------------------------------------
    async def test_load_returns_exactly_the_appended_events(self, persistence: Persistence) -> None:
        events = [
            *closed_turn(0),
            Event.make("sandbox/mode", 10, T0 + 10, {"mode": "read-only", "source": "delegation"}),
            Event.make("conformance/extra", 11, T0 + 11, {"x": 1}, ignorable=True),
            Event.make(
                "user/message",
                12,
                T0 + 12,
                {"content": "compacted", "source": "compaction"},
                surface_op={"op": "replace", "start": 0, "end": 3},
            ),
            Event.make("session/end-seed", 13, T0 + 13, {}),
        ]
        await self._stored(persistence, events)
        stored = await persistence.load("s-1")
        assert dicts(stored.events) == dicts(events)
        assert [e.to_json() for e in stored.events] == [e.to_json() for e in events]
        assert stored.repair == type(stored.repair)()

    async def test_unicode_and_nested_payloads_round_trip(self, persistence: Persistence) -> None:
        data = {
            "content": 'héllo — 世界 🧪 \u0000 nul, tab\t, newline\n, quote" backslash\\',
            "nested": {"list": [1, -2, 3.25, 1e300, True, False, None, "ü"], "empty": {}},
            "deep": [[[[{"k": [[["v"]]]}]]]],
            "keys with spaces/and:punctuation": {"ключ": "значение", "": "empty key"},
            "big": 2**70,
            "float": 0.1,
            "whole_float": 2.0,
            "negative": -(2**63),
        }
        events = make_events(0, ("session/title", data))
        await self._stored(persistence, events)
        stored = (await persistence.load("s-1")).events[0]
        assert stored.to_dict() == events[0].to_dict()
        assert isinstance(stored.data["whole_float"], float)
        assert isinstance(stored.data["big"], int)
        assert list(stored.data) == list(data)

    async def test_many_events_in_batches_round_trip(self, persistence: Persistence) -> None:
        events = make_events(
            0, *[("session/title", {"title": f"t{i}", "i": i}) for i in range(2_000)]
        )
        await persistence.create(header())
        for start in range(0, 2_000, 250):
            await persistence.append("s-1", events[start : start + 250])
        assert dicts((await persistence.load("s-1")).events) == dicts(events)

    async def test_committed_events_survive_reopen(
        self, persistence: Persistence, tmp_path: Path
    ) -> None:
        events = closed_turn(0)
        await self._stored(persistence, events)
        await persistence.close()
        reopened = await self.open_handle(tmp_path)
        try:
            stored = await reopened.load("s-1")
            assert stored.header == header()
            assert dicts(stored.events) == dicts(events)
            await reopened.append("s-1", closed_turn(10, turn=2))
            assert len((await reopened.load("s-1")).events) == 20
        finally:
            await reopened.close()

    async def test_load_and_inspect_of_unknown_id_raise_not_found(
        self, persistence: Persistence
    ) -> None:
        with pytest.raises(SessionNotFoundError):
            await persistence.load("missing")
        with pytest.raises(SessionNotFoundError):
            await persistence.inspect("missing")
        await persistence.create(header())
        with pytest.raises(SessionNotFoundError):
            await persistence.load("missing")

    async def test_session_ids_are_opaque_strings(self, persistence: Persistence) -> None:
        ids = ["a/b", "../up", ".hidden", "sp ace", "ünï", "%2F", "A", "a", "x" * 120]
        for index, session_id in enumerate(ids):
            await persistence.create(header(session_id, T0 + index))
            await persistence.append(
                session_id, make_events(0, ("session/title", {"title": session_id}))
            )
        assert [h.id for h in await persistence.list()] == ids
        for session_id in ids:
            stored = await persistence.load(session_id)
            assert stored.header.id == session_id
            assert stored.events[0].data["title"] == session_id

    # -- headers and list ----------------------------------------------------------------
    async def test_header_optional_fields_round_trip(self, persistence: Persistence) -> None:
        full = header(
            "child",
            T0 + 1,
            cwd="/work/repo",
            parent_session="parent",
            seed_length=42,
            origin="subagent",
            delegation_depth=2,
            agent_preset="explorer",
        )
        bare = header("bare", T0)
        await persistence.create(full)
        await persistence.create(bare)
        assert (await persistence.load("child")).header == full
        loaded_bare = (await persistence.load("bare")).header
        assert loaded_bare == bare
        assert loaded_bare.delegation_depth == 0
        assert loaded_bare.cwd is None and loaded_bare.seed_length is None

    async def test_list_returns_every_header_oldest_first(self, persistence: Persistence) -> None:
        assert await persistence.list() == []
        made = [
            header("late", T0 + 30, cwd="/a"),
            header("early", T0 + 10, parent_session="late", seed_length=3),
            header("middle", T0 + 20, origin="subagent", delegation_depth=1, agent_preset="p"),
        ]
        for item in made:
            await persistence.create(item)
        await persistence.append("middle", closed_turn(0))
        assert await persistence.list() == sorted(made, key=lambda h: h.created_at)

    async def test_list_reads_only_headers(self, persistence: Persistence) -> None:
        await self._stored(persistence, [*closed_turn(0), *closed_turn(10, turn=2)])
        await self._hook("corrupt_record", persistence, "s-1", 3)
        assert await persistence.list() == [header()]
        with pytest.raises(CorruptLogError):
            await persistence.load("s-1")

    async def test_format_version_mismatch_is_refused(self, persistence: Persistence) -> None:
        await self._stored(persistence, closed_turn(0))
        await self._hook("set_format_version", persistence, "s-1", 1)
        with pytest.raises(FormatVersionError) as caught:
            await persistence.load("s-1")
        assert caught.value.code == "UNSUPPORTED_FORMAT_VERSION"
        with pytest.raises(FormatVersionError):
            await persistence.inspect("s-1")

    # -- repair --------------------------------------------------------------------------
    async def test_load_closes_an_interrupted_turn(self, persistence: Persistence) -> None:
        events = [*closed_turn(0), *interrupted_turn(10)]
        await self._stored(persistence, events)
        stored = await persistence.load("s-1")
        assert dicts(stored.events) == [*dicts(events), *expected_closers(17)]
        assert stored.repair.synthesized == (
            "approval/decided",
            "tool/result",
            "step/end",
            "turn/end",
        )
        assert stored.repair.unmatched_approvals == ("ap-9",)
        assert stored.repair.dropped_tail == 0
        assert not has_open_turn(stored.events)

    async def test_repair_is_durable_and_appends_continue(
        self, persistence: Persistence, tmp_path: Path
    ) -> None:
        events = [*closed_turn(0), *interrupted_turn(10)]
        await self._stored(persistence, events)
        repaired = await persistence.load("s-1")
        reopened = await self.open_handle(tmp_path)
        try:
            again = await reopened.load("s-1")
            assert dicts(again.events) == dicts(repaired.events)
            assert not again.repair.changed
            assert again.repair.unmatched_approvals == ()
            more = closed_turn(21, turn=3)
            await reopened.append("s-1", more)
            assert dicts((await reopened.load("s-1")).events) == dicts([*repaired.events, *more])
        finally:
            await reopened.close()
        with pytest.raises(SeqConflictError):
            await persistence.append("s-1", closed_turn(21, turn=3))

    async def test_repair_of_a_turn_without_a_step(self, persistence: Persistence) -> None:
        events = make_events(
            0,
            ("turn/start", {"turn": 1}),
            ("user/message", {"content": "hi", "source": "user"}),
        )
        await self._stored(persistence, events)
        stored = await persistence.load("s-1")
        assert dicts(stored.events[2:]) == [
            {
                "type": "turn/end",
                "seq": 2,
                "time": T0 + 1,
                "data": {"turn": 1, "reason": "interrupted"},
            }
        ]
        assert stored.repair.synthesized == ("turn/end",)

    async def test_between_turn_tail_is_preserved(self, persistence: Persistence) -> None:
        events = [
            *closed_turn(0),
            *make_events(
                10,
                ("sandbox/mode", {"mode": "workspace-write"}),
                ("approval/policy", {"policy": "never"}),
                ("permission/preset", {"preset": "custom"}),
            ),
        ]
        await self._stored(persistence, events)
        stored = await persistence.load("s-1")
        assert dicts(stored.events) == dicts(events)
        assert not stored.repair.changed

    async def test_inspect_shows_the_repair_without_writing(self, persistence: Persistence) -> None:
        events = [*closed_turn(0), *interrupted_turn(10)]
        await self._stored(persistence, events)
        first = await persistence.inspect("s-1")
        second = await persistence.inspect("s-1")
        assert dicts(first.events) == [*dicts(events), *expected_closers(17)]
        assert dicts(second.events) == dicts(first.events)
        assert first.repair == second.repair
        assert first.repair.synthesized == (
            "approval/decided",
            "tool/result",
            "step/end",
            "turn/end",
        )
        loaded = await persistence.load("s-1")
        assert loaded.repair == first.repair  # inspect did not repair anything
        assert dicts(loaded.events) == dicts(first.events)

    async def test_inspect_leaves_stored_bytes_unchanged(self, persistence: Persistence) -> None:
        await self._stored(persistence, [*closed_turn(0), *interrupted_turn(10)])
        await self._hook("corrupt_tail", persistence, "s-1")
        before = await self._hook("storage_snapshot", persistence)
        stored = await persistence.inspect("s-1")
        await persistence.inspect("s-1")
        await persistence.list()
        assert await self._hook("storage_snapshot", persistence) == before
        assert stored.repair.dropped_tail == 1
        assert len(stored.repair.synthesized) == 4

    async def test_torn_tail_is_dropped_durably(
        self, persistence: Persistence, tmp_path: Path
    ) -> None:
        events = closed_turn(0)
        await self._stored(persistence, events)
        await self._hook("corrupt_tail", persistence, "s-1")
        inspected = await persistence.inspect("s-1")
        assert inspected.repair.dropped_tail == 1
        assert dicts(inspected.events) == dicts(events)
        stored = await persistence.load("s-1")
        assert dicts(stored.events) == dicts(events)
        assert stored.repair.dropped_tail == 1
        assert stored.repair.synthesized == ()
        assert stored.repair.changed
        reopened = await self.open_handle(tmp_path)
        try:
            again = await reopened.load("s-1")
            assert not again.repair.changed
            assert dicts(again.events) == dicts(events)
        finally:
            await reopened.close()

    async def test_torn_tail_inside_a_turn_is_dropped_and_the_turn_closed(
        self, persistence: Persistence
    ) -> None:
        events = [*closed_turn(0), *interrupted_turn(10)]
        await self._stored(persistence, events)
        await self._hook("corrupt_tail", persistence, "s-1")
        stored = await persistence.load("s-1")
        assert stored.repair.dropped_tail == 1
        assert dicts(stored.events) == [*dicts(events), *expected_closers(17)]
        more = closed_turn(21, turn=3)
        await persistence.append("s-1", more)
        assert dicts((await persistence.load("s-1")).events) == dicts([*stored.events, *more])

    async def test_append_after_a_torn_tail_continues_the_intact_log(
        self, persistence: Persistence, tmp_path: Path
    ) -> None:
        events = closed_turn(0)
        await self._stored(persistence, events[:5])
        await self._hook("corrupt_tail", persistence, "s-1")
        reopened = await self.open_handle(tmp_path)
        try:
            await reopened.append("s-1", events[5:])
        finally:
            await reopened.close()
        stored = await persistence.load("s-1")
        assert dicts(stored.events) == dicts(events)
        assert not stored.repair.changed

    async def test_damage_before_the_tail_is_corruption(self, persistence: Persistence) -> None:
        await self._stored(persistence, [*closed_turn(0), *closed_turn(10, turn=2)])
        await self._hook("corrupt_record", persistence, "s-1", 4)
        before = await self._snapshot_or_none(persistence)
        with pytest.raises(CorruptLogError) as caught:
            await persistence.load("s-1")
        assert caught.value.code == "CORRUPT_LOG"
        assert "'s-1'" in str(caught.value)
        with pytest.raises(CorruptLogError):
            await persistence.inspect("s-1")
        assert await self._snapshot_or_none(persistence) == before

    async def test_unknown_required_event_type_is_refused(self, persistence: Persistence) -> None:
        events = [*closed_turn(0), Event.make(UNKNOWN_TYPE, 10, T0 + 10, {"x": 1})]
        await self._stored(persistence, events)
        for read in (persistence.load, persistence.inspect):
            with pytest.raises(UnknownEventTypeError) as caught:
                await read("s-1")
            assert caught.value.code == "UNKNOWN_EVENT_TYPE"
            assert UNKNOWN_TYPE in str(caught.value)

    async def test_unknown_required_event_type_is_not_a_torn_tail(
        self, persistence: Persistence
    ) -> None:
        events = [*closed_turn(0), Event.make(UNKNOWN_TYPE, 10, T0 + 10, {"x": 1})]
        await self._stored(persistence, events)
        await self._hook("corrupt_tail", persistence, "s-1")
        with pytest.raises(UnknownEventTypeError):
            await persistence.load("s-1")

    async def test_ignorable_unknown_event_type_is_kept(self, persistence: Persistence) -> None:
        events = [
            *closed_turn(0),
            Event.make(UNKNOWN_TYPE, 10, T0 + 10, {"x": [1, 2]}, ignorable=True),
        ]
        await self._stored(persistence, events)
        stored = await persistence.load("s-1")
        assert dicts(stored.events) == dicts(events)
        assert stored.events[10].ignorable is True

    # -- close ---------------------------------------------------------------------------
    async def test_close_is_idempotent(self, tmp_path: Path) -> None:
        handle = await self.open_handle(tmp_path)
        await handle.create(header())
        await handle.close()
        await handle.close()
        reopened = await self.open_handle(tmp_path)
        try:
            assert [h.id for h in await reopened.list()] == ["s-1"]
        finally:
            await reopened.close()

    async def _snapshot_or_none(self, persistence: Persistence) -> object:
        try:
            return await _maybe_await(self.storage_snapshot(persistence))
        except NotImplementedError:
            return None


__all__ = [
    "T0",
    "UNKNOWN_TYPE",
    "PersistenceConformance",
    "closed_turn",
    "dicts",
    "expected_closers",
    "header",
    "interrupted_turn",
    "make_events",
    "titles",
]
