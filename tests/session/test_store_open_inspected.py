"""Cold resume may reuse a just-inspected view, but never skips a needed repair."""

from __future__ import annotations

from pathlib import Path

from tether.session import SessionMeta, SessionStore
from tether.session.persistence import JsonlPersistence


async def make(tmp_path: Path, *, open_turn: bool) -> str:
    store = SessionStore(JsonlPersistence(tmp_path))
    session = store.create(meta=SessionMeta(cwd=str(tmp_path)))
    session.append("turn/start", {"turn": 1})
    if not open_turn:
        session.append("turn/end", {"turn": 1, "reason": "completed"})
    await store.close()
    return session.id


async def test_a_clean_inspected_view_is_reused(tmp_path: Path) -> None:
    session_id = await make(tmp_path, open_turn=False)
    store = SessionStore(JsonlPersistence(tmp_path))
    view = await store.inspect(session_id)
    session = await store.open(session_id, inspected=view)
    assert [e.to_dict() for e in session.events[: len(view.events)]] == [
        e.to_dict() for e in view.events
    ]
    assert session.first_live_seq == len(view.events)
    assert session.events[-1].type == "session/end-seed"
    await store.close()


async def test_a_view_that_needed_repair_is_loaded_and_repaired_durably(tmp_path: Path) -> None:
    session_id = await make(tmp_path, open_turn=True)
    store = SessionStore(JsonlPersistence(tmp_path))
    view = await store.inspect(session_id)
    assert view.repair.changed
    session = await store.open(session_id, inspected=view)
    await store.close()
    stored = await JsonlPersistence(tmp_path).inspect(session_id)
    assert not stored.repair.changed  # the repair was written, not just shown
    assert [e.type for e in stored.events][-2:] == ["turn/end", "session/end-seed"]
    assert session.events[len(view.events) - 1].data == {"turn": 1, "reason": "interrupted"}
