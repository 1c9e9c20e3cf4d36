"""``reopen``: handles onto one storage see each other's commits, and racing ones have one
winner."""

from __future__ import annotations

import asyncio

from tether.session.persistence._base import SeqConflictError, SessionExistsError
from tether.testing._capabilities import Capability
from tether.testing._checks import Spec, Trial, raises
from tether.testing._fixtures import (
    T0,
    closed_turn,
    dicts,
    header,
    interrupted_turn,
    make_events,
    titles,
)

spec = Spec(Capability.REOPEN)


@spec.check()
async def create_race_between_handles_has_one_winner(trial: Trial) -> None:
    persistence = trial.persistence
    async with trial.another_handle() as other:
        results = await asyncio.gather(
            persistence.create(header(created_at=T0)),
            other.create(header(created_at=T0 + 1)),
            return_exceptions=True,
        )
    errors = [r for r in results if isinstance(r, BaseException)]
    assert len(errors) == 1 and isinstance(errors[0], SessionExistsError)
    assert [h.id for h in await persistence.list()] == ["s-1"]


@spec.check()
async def racing_writers_exactly_one_wins(trial: Trial) -> None:
    persistence = trial.persistence
    events = titles(0, 10)
    await trial.stored(events[:2])
    mine = events[2:5]
    theirs = make_events(2, ("session/title", {"title": "theirs"}))
    async with trial.another_handle() as other:
        results = await asyncio.gather(
            persistence.append("s-1", mine),
            other.append("s-1", theirs),
            return_exceptions=True,
        )
    errors = [r for r in results if isinstance(r, BaseException)]
    assert len(errors) == 1 and isinstance(errors[0], SeqConflictError)
    winner = mine if results[0] is None else theirs
    assert dicts((await persistence.load("s-1")).events) == dicts([*events[:2], *winner])


@spec.check()
async def stale_handle_gets_seq_conflict_then_continues(trial: Trial) -> None:
    persistence = trial.persistence
    events = titles(0, 10)
    await trial.stored(events[:2])
    async with trial.another_handle() as other:
        await other.append("s-1", events[2:4])
    with raises(SeqConflictError):
        await persistence.append("s-1", events[2:3])
    await persistence.append("s-1", events[4:])
    assert dicts((await persistence.load("s-1")).events) == dicts(events)


@spec.check()
async def committed_events_survive_reopen(trial: Trial) -> None:
    persistence = trial.persistence
    events = closed_turn(0)
    await trial.stored(events)
    await persistence.close()
    async with trial.another_handle() as reopened:
        stored = await reopened.load("s-1")
        assert stored.header == header()
        assert dicts(stored.events) == dicts(events)
        await reopened.append("s-1", closed_turn(10, turn=2))
        assert len((await reopened.load("s-1")).events) == 20


@spec.check()
async def repair_is_durable_and_appends_continue(trial: Trial) -> None:
    persistence = trial.persistence
    events = [*closed_turn(0), *interrupted_turn(10)]
    await trial.stored(events)
    repaired = await persistence.load("s-1")
    async with trial.another_handle() as reopened:
        again = await reopened.load("s-1")
        assert dicts(again.events) == dicts(repaired.events)
        assert not again.repair.changed
        assert again.repair.unmatched_approvals == ()
        more = closed_turn(21, turn=3)
        await reopened.append("s-1", more)
        assert dicts((await reopened.load("s-1")).events) == dicts([*repaired.events, *more])
    with raises(SeqConflictError):
        await persistence.append("s-1", closed_turn(21, turn=3))
