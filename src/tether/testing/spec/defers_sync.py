"""``defers_sync``: a deferred commit is a commit under every rule, only its sync comes later.

A check cannot pull the power, so what is checked is everything else: deferred commits are
read back exactly (by this handle and, with ``reopen``, by another one before any sync),
follow the seq and creation rules of ``append`` and ``create_with_events``, mix with durable
commits in any order, and ``sync`` and ``close`` lose nothing.
"""

from __future__ import annotations

from tether.session.persistence._base import (
    DefersSync,
    Persistence,
    SeqConflictError,
    SessionExistsError,
    SessionNotFoundError,
)
from tether.testing._capabilities import Capability
from tether.testing._checks import Spec, Trial, raises
from tether.testing._fixtures import closed_turn, dicts, header, titles

spec = Spec(Capability.DEFERS_SYNC)


def deferring(persistence: Persistence) -> DefersSync:
    assert isinstance(persistence, DefersSync), (
        f"{type(persistence).__name__} claims defers_sync without append_deferred, "
        "create_deferred and sync"
    )
    return persistence


@spec.check()
async def deferred_commits_read_back_exactly(trial: Trial) -> None:
    backend = deferring(trial.persistence)
    events = [*closed_turn(0), *titles(10, 3)]
    await backend.create_deferred(header(), events[:2])
    await backend.append_deferred("s-1", events[2:5])
    await trial.persistence.append("s-1", events[5:8])  # durable, after deferred ones
    await backend.append_deferred("s-1", events[8:])
    stored = await trial.persistence.load("s-1")
    assert dicts(stored.events) == dicts(events)
    assert stored.repair == type(stored.repair)()
    await backend.sync("s-1")
    await backend.sync("s-1")  # nothing left to sync
    assert dicts((await trial.persistence.inspect("s-1")).events) == dicts(events)
    assert [h.id for h in await trial.persistence.list()] == ["s-1"]


@spec.check()
async def deferred_commits_follow_the_seq_rules(trial: Trial) -> None:
    backend = deferring(trial.persistence)
    events = titles(0, 6)
    await backend.create_deferred(header(), events[:2])
    with raises(SeqConflictError):
        await backend.append_deferred("s-1", events[3:4])  # a gap
    with raises(SeqConflictError):
        await backend.append_deferred("s-1", events[1:3])  # behind the stored length
    with raises(SeqConflictError):
        await backend.append_deferred("s-1", [events[2], events[4]])  # not contiguous
    with raises(SessionNotFoundError):
        await backend.append_deferred("nope", events[:1])
    await backend.append_deferred("s-1", [])  # nothing to commit
    await backend.append_deferred("s-1", events[2:])
    assert dicts((await trial.persistence.load("s-1")).events) == dicts(events)


@spec.check()
async def a_deferred_creation_follows_the_creation_rules(trial: Trial) -> None:
    backend = deferring(trial.persistence)
    await backend.create_deferred(header(), titles(0, 1))
    with raises(SessionExistsError):
        await backend.create_deferred(header(), titles(0, 2))
    with raises(SeqConflictError):
        await backend.create_deferred(header("s-2"), titles(1, 1))
    await backend.create_deferred(header("s-3"), [])
    assert sorted(h.id for h in await trial.persistence.list()) == ["s-1", "s-3"]
    assert dicts((await trial.persistence.load("s-1")).events) == dicts(titles(0, 1))
    assert (await trial.persistence.load("s-3")).events == ()


@spec.check(Capability.REOPEN)
async def another_handle_sees_deferred_commits_before_any_sync(trial: Trial) -> None:
    backend = deferring(trial.persistence)
    events = titles(0, 4)
    await backend.create_deferred(header(), events[:1])
    await backend.append_deferred("s-1", events[1:])
    async with trial.another_handle() as other:
        assert dicts((await other.inspect("s-1")).events) == dicts(events)
        with raises(SeqConflictError):  # a racing writer still loses
            await other.append("s-1", titles(2, 1))


@spec.check(Capability.REOPEN)
async def close_keeps_every_deferred_commit(trial: Trial) -> None:
    backend = deferring(trial.persistence)
    events = titles(0, 5)
    await backend.create_deferred(header(), events[:2])
    await backend.append_deferred("s-1", events[2:])
    await trial.persistence.close()
    async with trial.another_handle() as reopened:
        assert dicts((await reopened.load("s-1")).events) == dicts(events)
