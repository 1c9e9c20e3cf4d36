"""``corrupt_record``: damage before the tail is corruption, never repaired away."""

from __future__ import annotations

from tether.session.persistence._base import CorruptLogError
from tether.testing._capabilities import Capability
from tether.testing._checks import Spec, Trial, raises
from tether.testing._fixtures import closed_turn, header

spec = Spec(Capability.CORRUPT_RECORD)


@spec.check()
async def damage_before_the_tail_is_corruption(trial: Trial) -> None:
    persistence = trial.persistence
    await trial.stored([*closed_turn(0), *closed_turn(10, turn=2)])
    await trial.corrupt_record("s-1", 4)
    before = await trial.snapshot_if_claimed()
    with raises(CorruptLogError) as caught:
        await persistence.load("s-1")
    assert caught.error.code == "CORRUPT_LOG"
    assert "'s-1'" in str(caught.error)
    with raises(CorruptLogError):
        await persistence.inspect("s-1")
    assert await trial.snapshot_if_claimed() == before


@spec.check()
async def list_reads_only_headers(trial: Trial) -> None:
    persistence = trial.persistence
    await trial.stored([*closed_turn(0), *closed_turn(10, turn=2)])
    await trial.corrupt_record("s-1", 3)
    assert await persistence.list() == [header()]
    with raises(CorruptLogError):
        await persistence.load("s-1")
