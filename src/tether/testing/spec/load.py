"""``load``: exactly what was appended, an interrupted turn closed durably, unknown required
event types refused (see :mod:`tether.session.persistence._repair` for the closing events)."""

from __future__ import annotations

from tether.session._events import Event, UnknownEventTypeError
from tether.session._session import has_open_turn
from tether.session.persistence._base import SessionNotFoundError
from tether.testing._capabilities import Capability
from tether.testing._checks import Spec, Trial, raises
from tether.testing._fixtures import (
    T0,
    UNKNOWN_TYPE,
    closed_turn,
    dicts,
    expected_closers,
    header,
    interrupted_turn,
    make_events,
)

spec = Spec(Capability.LOAD)


# -- an exact round trip -------------------------------------------------------------------------
@spec.check()
async def load_returns_exactly_the_appended_events(trial: Trial) -> None:
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
    await trial.stored(events)
    stored = await trial.persistence.load("s-1")
    assert dicts(stored.events) == dicts(events)
    assert [e.to_json() for e in stored.events] == [e.to_json() for e in events]
    assert stored.repair == type(stored.repair)()


@spec.check()
async def unicode_and_nested_payloads_round_trip(trial: Trial) -> None:
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
    await trial.stored(events)
    stored = (await trial.persistence.load("s-1")).events[0]
    assert stored.to_dict() == events[0].to_dict()
    assert isinstance(stored.data["whole_float"], float)
    assert isinstance(stored.data["big"], int)
    assert list(stored.data) == list(data)


@spec.check()
async def many_events_in_batches_round_trip(trial: Trial) -> None:
    persistence = trial.persistence
    events = make_events(0, *[("session/title", {"title": f"t{i}", "i": i}) for i in range(2_000)])
    await persistence.create(header())
    for start in range(0, 2_000, 250):
        await persistence.append("s-1", events[start : start + 250])
    assert dicts((await persistence.load("s-1")).events) == dicts(events)


@spec.check()
async def load_and_inspect_of_unknown_id_raise_not_found(trial: Trial) -> None:
    persistence = trial.persistence
    with raises(SessionNotFoundError):
        await persistence.load("missing")
    with raises(SessionNotFoundError):
        await persistence.inspect("missing")
    await persistence.create(header())
    with raises(SessionNotFoundError):
        await persistence.load("missing")


@spec.check()
async def session_ids_are_opaque_strings(trial: Trial) -> None:
    persistence = trial.persistence
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


@spec.check()
async def header_optional_fields_round_trip(trial: Trial) -> None:
    persistence = trial.persistence
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


# -- repair of an interrupted turn ---------------------------------------------------------------
@spec.check()
async def load_closes_an_interrupted_turn(trial: Trial) -> None:
    events = [*closed_turn(0), *interrupted_turn(10)]
    await trial.stored(events)
    stored = await trial.persistence.load("s-1")
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


@spec.check()
async def repair_of_a_turn_without_a_step(trial: Trial) -> None:
    events = make_events(
        0,
        ("turn/start", {"turn": 1}),
        ("user/message", {"content": "hi", "source": "user"}),
    )
    await trial.stored(events)
    stored = await trial.persistence.load("s-1")
    assert dicts(stored.events[2:]) == [
        {
            "type": "turn/end",
            "seq": 2,
            "time": T0 + 1,
            "data": {"turn": 1, "reason": "interrupted"},
        }
    ]
    assert stored.repair.synthesized == ("turn/end",)


@spec.check()
async def between_turn_tail_is_preserved(trial: Trial) -> None:
    events = [
        *closed_turn(0),
        *make_events(
            10,
            ("sandbox/mode", {"mode": "workspace-write"}),
            ("approval/policy", {"policy": "never"}),
            ("permission/preset", {"preset": "custom"}),
        ),
    ]
    await trial.stored(events)
    stored = await trial.persistence.load("s-1")
    assert dicts(stored.events) == dicts(events)
    assert not stored.repair.changed


# -- event types this tether does not know -------------------------------------------------------
@spec.check()
async def unknown_required_event_type_is_refused(trial: Trial) -> None:
    persistence = trial.persistence
    events = [*closed_turn(0), Event.make(UNKNOWN_TYPE, 10, T0 + 10, {"x": 1})]
    await trial.stored(events)
    for read in (persistence.load, persistence.inspect):
        with raises(UnknownEventTypeError) as caught:
            await read("s-1")
        assert caught.error.code == "UNKNOWN_EVENT_TYPE"
        assert UNKNOWN_TYPE in str(caught.error)


@spec.check()
async def ignorable_unknown_event_type_is_kept(trial: Trial) -> None:
    events = [
        *closed_turn(0),
        Event.make(UNKNOWN_TYPE, 10, T0 + 10, {"x": [1, 2]}, ignorable=True),
    ]
    await trial.stored(events)
    stored = await trial.persistence.load("s-1")
    assert dicts(stored.events) == dicts(events)
    assert stored.events[10].ignorable is True
