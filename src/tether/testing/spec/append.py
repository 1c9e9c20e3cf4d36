"""``append``: all or nothing, and its first event continues the stored length."""

from __future__ import annotations

from tether.session.persistence._base import SeqConflictError, SessionNotFoundError
from tether.testing._capabilities import Capability
from tether.testing._checks import Spec, Trial, raises
from tether.testing._fixtures import T0, closed_turn, dicts, header, titles

spec = Spec(Capability.APPEND)


@spec.check()
async def append_continues_stored_seq(trial: Trial) -> None:
    persistence = trial.persistence
    events = titles(0, 10)
    await trial.stored(events[:3])
    await persistence.append("s-1", events[3:4])
    await persistence.append("s-1", events[4:])
    assert dicts((await persistence.load("s-1")).events) == dicts(events)


@spec.check()
async def append_empty_batch_is_a_no_op(trial: Trial) -> None:
    persistence = trial.persistence
    await trial.stored(closed_turn(0))
    await persistence.append("s-1", [])
    assert dicts((await persistence.load("s-1")).events) == dicts(closed_turn(0))


@spec.check()
async def append_to_unknown_session_raises_not_found(trial: Trial) -> None:
    with raises(SessionNotFoundError) as caught:
        await trial.persistence.append("nope", closed_turn(0))
    assert caught.error.code == "SESSION_NOT_FOUND"


@spec.check()
async def append_with_gap_raises_seq_conflict(trial: Trial) -> None:
    persistence = trial.persistence
    events = titles(0, 10)
    await persistence.create(header())
    with raises(SeqConflictError):
        await persistence.append("s-1", events[1:3])
    await persistence.append("s-1", events[:2])
    with raises(SeqConflictError) as caught:
        await persistence.append("s-1", events[3:5])
    assert caught.error.code == "SEQ_CONFLICT"
    assert dicts((await persistence.load("s-1")).events) == dicts(events[:2])


@spec.check()
async def append_overlapping_stored_seq_raises_seq_conflict(trial: Trial) -> None:
    persistence = trial.persistence
    events = titles(0, 10)
    await trial.stored(events[:4])
    with raises(SeqConflictError):
        await persistence.append("s-1", events[2:6])
    with raises(SeqConflictError):
        await persistence.append("s-1", events[:1])
    assert dicts((await persistence.load("s-1")).events) == dicts(events[:4])


@spec.check()
async def append_non_contiguous_batch_stores_nothing(trial: Trial) -> None:
    persistence = trial.persistence
    events = titles(0, 10)
    await trial.stored(events[:2])
    with raises(SeqConflictError):
        await persistence.append("s-1", [events[2], events[4]])
    assert dicts((await persistence.load("s-1")).events) == dicts(events[:2])
    await persistence.append("s-1", events[2:])
    assert dicts((await persistence.load("s-1")).events) == dicts(events)


@spec.check()
async def sessions_are_independent(trial: Trial) -> None:
    persistence = trial.persistence
    await persistence.create(header("a"))
    await persistence.create(header("b", T0 + 1))
    await persistence.append("a", closed_turn(0))
    await persistence.append("b", titles(0, 3))
    assert dicts((await persistence.load("a")).events) == dicts(closed_turn(0))
    assert dicts((await persistence.load("b")).events) == dicts(titles(0, 3))
