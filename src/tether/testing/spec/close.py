"""``close``: idempotent, and nothing committed is lost by it."""

from __future__ import annotations

from tether.testing._capabilities import Capability
from tether.testing._checks import Spec, Trial
from tether.testing._fixtures import header

spec = Spec(Capability.CLOSE)


@spec.check(Capability.REOPEN)
async def close_is_idempotent(trial: Trial) -> None:
    handle = trial.persistence
    await handle.create(header())
    await handle.close()
    await handle.close()
    async with trial.another_handle() as reopened:
        assert [h.id for h in await reopened.list()] == ["s-1"]
