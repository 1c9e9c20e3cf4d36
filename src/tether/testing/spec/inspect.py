"""``inspect``: the view ``load`` would return, written nowhere."""

from __future__ import annotations

from tether.testing._capabilities import Capability
from tether.testing._checks import Spec, Trial
from tether.testing._fixtures import closed_turn, dicts, expected_closers, interrupted_turn

spec = Spec(Capability.INSPECT)


@spec.check()
async def inspect_shows_the_repair_without_writing(trial: Trial) -> None:
    persistence = trial.persistence
    events = [*closed_turn(0), *interrupted_turn(10)]
    await trial.stored(events)
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
