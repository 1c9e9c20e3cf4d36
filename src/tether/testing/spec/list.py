"""``list``: every stored header, oldest first."""

from __future__ import annotations

from tether.testing._capabilities import Capability
from tether.testing._checks import Spec, Trial
from tether.testing._fixtures import T0, closed_turn, header

spec = Spec(Capability.LIST)


@spec.check()
async def list_returns_every_header_oldest_first(trial: Trial) -> None:
    persistence = trial.persistence
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
