"""``create``: a new header is stored once; a taken id is refused."""

from __future__ import annotations

from tether.session.persistence._base import Persistence, SessionExistsError
from tether.testing._capabilities import Capability
from tether.testing._checks import Spec, Trial, raises
from tether.testing._fixtures import T0, header

spec = Spec(Capability.CREATE)


@spec.check()
async def implements_the_protocol(trial: Trial) -> None:
    assert isinstance(trial.persistence, Persistence)


@spec.check()
async def create_then_load_is_empty(trial: Trial) -> None:
    persistence = trial.persistence
    await persistence.create(header(cwd="/work"))
    stored = await persistence.load("s-1")
    assert stored.header == header(cwd="/work")
    assert stored.events == ()
    assert not stored.repair.changed


@spec.check()
async def create_twice_raises_session_exists(trial: Trial) -> None:
    persistence = trial.persistence
    await persistence.create(header())
    with raises(SessionExistsError) as caught:
        await persistence.create(header(created_at=T0 + 5))
    assert caught.error.code == "SESSION_ALREADY_EXISTS"
    assert (await persistence.load("s-1")).header.created_at == T0
