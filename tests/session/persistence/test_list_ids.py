"""``list_ids``: every stored id without parsing headers, for both backends."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.session import Event, SessionHeader
from tether.session.persistence import JsonlPersistence, SqlitePersistence
from tether.session.persistence.base import ListsIds, Persistence


@pytest.fixture(params=["sqlite", "jsonl"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Persistence:
    if request.param == "sqlite":
        return SqlitePersistence(tmp_path / "s.db")
    return JsonlPersistence(tmp_path / "dir")


async def test_list_ids_names_every_session(backend: Persistence) -> None:
    assert isinstance(backend, ListsIds)
    ids = ["plain-1", "with space/and ünïcode", "z"]
    for created, session_id in enumerate(ids):
        await backend.create(SessionHeader(id=session_id, created_at=created))
        await backend.append(session_id, [Event.make("session/end-seed", 0, created, {})])
    assert sorted(await backend.list_ids()) == sorted(ids)
    assert sorted(h.id for h in await backend.list()) == sorted(ids)
    await backend.close()
