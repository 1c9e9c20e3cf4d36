"""A child whose log cannot be read is listed with a diagnostic, not hidden."""

from __future__ import annotations

from pathlib import Path

from subagent_support import settle, subagents, world

from tether.session.persistence import JsonlPersistence


async def test_an_unreadable_child_is_shown_with_a_diagnostic(tmp_path: Path) -> None:
    w = world(tmp_path, [{"match": {"depth": 1}, "steps": [{"text": "ok"}]}])
    manager = subagents(w)
    parent = w.root()
    healthy = await manager.start(parent, "fine", label="healthy")
    broken = await manager.start(parent, "fine", label="broken")
    await settle(w)
    assert isinstance(w.store.persistence, JsonlPersistence)
    log = w.store.persistence.log_path(broken)
    lines = log.read_text().splitlines(keepends=True)
    lines.insert(2, "{not json\n")  # damage before valid records: corruption, not a torn tail
    log.write_text("".join(lines))
    rows = {row.id: row for row in await manager.list_children(parent.id)}
    assert rows[healthy].diagnostic is None and rows[healthy].label == "healthy"
    assert rows[broken].diagnostic == "corrupt_log"
