"""``corrupt_tail``: a torn final record, as a crash mid-write leaves, is dropped durably."""

from __future__ import annotations

from tether.session._events import Event, UnknownEventTypeError
from tether.testing._capabilities import Capability
from tether.testing._checks import Spec, Trial, raises
from tether.testing._fixtures import (
    T0,
    UNKNOWN_TYPE,
    closed_turn,
    dicts,
    expected_closers,
    interrupted_turn,
)

spec = Spec(Capability.CORRUPT_TAIL)


@spec.check(Capability.REOPEN)
async def torn_tail_is_dropped_durably(trial: Trial) -> None:
    persistence = trial.persistence
    events = closed_turn(0)
    await trial.stored(events)
    await trial.corrupt_tail("s-1")
    inspected = await persistence.inspect("s-1")
    assert inspected.repair.dropped_tail == 1
    assert dicts(inspected.events) == dicts(events)
    stored = await persistence.load("s-1")
    assert dicts(stored.events) == dicts(events)
    assert stored.repair.dropped_tail == 1
    assert stored.repair.synthesized == ()
    assert stored.repair.changed
    async with trial.another_handle() as reopened:
        again = await reopened.load("s-1")
        assert not again.repair.changed
        assert dicts(again.events) == dicts(events)


@spec.check()
async def torn_tail_inside_a_turn_is_dropped_and_the_turn_closed(trial: Trial) -> None:
    persistence = trial.persistence
    events = [*closed_turn(0), *interrupted_turn(10)]
    await trial.stored(events)
    await trial.corrupt_tail("s-1")
    stored = await persistence.load("s-1")
    assert stored.repair.dropped_tail == 1
    assert dicts(stored.events) == [*dicts(events), *expected_closers(17)]
    more = closed_turn(21, turn=3)
    await persistence.append("s-1", more)
    assert dicts((await persistence.load("s-1")).events) == dicts([*stored.events, *more])


@spec.check(Capability.REOPEN)
async def append_after_a_torn_tail_continues_the_intact_log(trial: Trial) -> None:
    events = closed_turn(0)
    await trial.stored(events[:5])
    await trial.corrupt_tail("s-1")
    async with trial.another_handle() as reopened:
        await reopened.append("s-1", events[5:])
    stored = await trial.persistence.load("s-1")
    assert dicts(stored.events) == dicts(events)
    assert not stored.repair.changed


@spec.check()
async def unknown_required_event_type_is_not_a_torn_tail(trial: Trial) -> None:
    events = [*closed_turn(0), Event.make(UNKNOWN_TYPE, 10, T0 + 10, {"x": 1})]
    await trial.stored(events)
    await trial.corrupt_tail("s-1")
    with raises(UnknownEventTypeError):
        await trial.persistence.load("s-1")
