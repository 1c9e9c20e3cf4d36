"""The file tools hide a store another run used (``tether.session._known_stores``): the
sandbox composed over it put it on the list every run hides, so a run over another store
neither reads its sessions nor writes it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tether.kernel import SESSIONS_SERVICE, Context, Runtime
from tether.sandbox._plugin import SandboxConfig, plugin
from tether.session import SessionStore
from tether.session.persistence._sqlite import SqlitePersistence
from tether.tools.fs import GrepTool, LsTool, ReadTool, WriteTool

from .conftest import Host, marker, run_tool

HIDDEN = "it is hidden from every agent (it holds credentials or tether's own state)"


def compose(db: Path) -> Context:
    """A run's context over the store at ``db``, with the sandbox plugin applied."""
    ctx = Context(Runtime())
    ctx.provide(SESSIONS_SERVICE, SessionStore(SqlitePersistence(db)))
    plugin.apply(ctx, SandboxConfig())
    return ctx


async def test_a_store_another_run_used_is_hidden_from_the_file_tools(host: Host) -> None:
    db = host.ws / "state" / "a.db"
    db.parent.mkdir()
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE events (body TEXT)")
    conn.execute("INSERT INTO events VALUES ('session-log-must-not-leak')")
    conn.commit()
    try:
        compose(db)  # run A
        ctx = compose(host.top / "b.db")  # run B, over a store of its own
        policy = host.policy("workspace-write")
        for rel in ("state/a.db", "state/a.db-wal"):
            result = await run_tool(ReadTool(), policy, ctx=ctx, path=rel)
            assert (
                result.content == f"Error: cannot read {rel}: {HIDDEN} {marker('workspace-write')}"
            )
        for rel in ("state/a.db", "state/a.db-journal", "state/a.db.answers/a-1.json"):
            result = await run_tool(WriteTool(), policy, ctx=ctx, path=rel, content="forged")
            assert (
                result.content == f"Error: cannot write {rel}: {HIDDEN} {marker('workspace-write')}"
            )
        grep = await run_tool(GrepTool(), policy, ctx=ctx, pattern="must-not-leak")
        assert grep.content == "no matches for must-not-leak"
        listing = await run_tool(LsTool(), policy, ctx=ctx, path="state")
        assert listing.content == "[empty directory]"
        assert sorted(p.name for p in db.parent.iterdir()) == ["a.db", "a.db-shm", "a.db-wal"]
        assert conn.execute("SELECT body FROM events").fetchall() == [
            ("session-log-must-not-leak",)
        ]
    finally:
        conn.close()
