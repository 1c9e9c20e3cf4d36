"""``storage_snapshot``: reading, even a log that ``load`` would repair, writes no byte."""

from __future__ import annotations

from tether.testing._capabilities import Capability
from tether.testing._checks import Spec, Trial
from tether.testing._fixtures import closed_turn, interrupted_turn

spec = Spec(Capability.STORAGE_SNAPSHOT)


@spec.check(Capability.CORRUPT_TAIL)
async def inspect_leaves_stored_bytes_unchanged(trial: Trial) -> None:
    persistence = trial.persistence
    await trial.stored([*closed_turn(0), *interrupted_turn(10)])
    await trial.corrupt_tail("s-1")
    before = await trial.storage_snapshot()
    stored = await persistence.inspect("s-1")
    await persistence.inspect("s-1")
    await persistence.list()
    assert await trial.storage_snapshot() == before
    assert stored.repair.dropped_tail == 1
    assert len(stored.repair.synthesized) == 4
