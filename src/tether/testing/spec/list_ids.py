"""``list_ids``: every stored id, without parsing a header."""

from __future__ import annotations

from tether.session._events import Event
from tether.session._header import SessionHeader
from tether.session.persistence._base import ListsIds
from tether.testing._capabilities import Capability
from tether.testing._checks import Spec, Trial

spec = Spec(Capability.LIST_IDS)


@spec.check()
async def list_ids_names_every_session(trial: Trial) -> None:
    backend = trial.persistence
    assert isinstance(backend, ListsIds)
    ids = ["plain-1", "with space/and ünïcode", "z"]
    for created, session_id in enumerate(ids):
        await backend.create(SessionHeader(id=session_id, created_at=created))
        await backend.append(session_id, [Event.make("session/end-seed", 0, created, {})])
    assert sorted(await backend.list_ids()) == sorted(ids)
    assert sorted(h.id for h in await backend.list()) == sorted(ids)
