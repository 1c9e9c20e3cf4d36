"""``tether sessions fsck --salvage DEST``: copy every session that can still be read into a
new store.

For a SQLite store the file is read read-only, session by session, around damaged pages
(:mod:`tether.session.persistence._sqlite_damage`); a JSONL store is read through its backend.
Each session is copied whole, as ``load`` would give it (an open turn closed, a torn tail
dropped), or not at all. The source is never written; DEST must not exist yet, so a salvage
never mixes with (or overwrites) sessions already stored.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field

from tether.errors import TetherError
from tether.kernel._printable import printable
from tether.session.persistence import open_persistence
from tether.session.persistence._base import StoredSession
from tether.session.persistence._factory import store_location
from tether.session.persistence._sqlite import read_view
from tether.session.persistence._sqlite_damage import read_only, session_ids
from tether.surfaces.cli._common import StoreNotFoundError, opened_store

NO_EVENTS = "no events (its scope was never stored, so it is not copied)"


class SalvageTargetError(TetherError):
    """``--salvage DEST`` names a store that exists already, or the damaged store itself."""

    code = "SALVAGE_TARGET"


@dataclass
class SalvageReport:
    dest: str
    copied: list[tuple[str, int, int]] = field(default_factory=list)
    """``(session id, events, damaged trailing records dropped)`` of each session copied."""
    lost: list[tuple[str, str]] = field(default_factory=list)
    """``(session id, why)`` of each session that could not be read."""
    listed_fully: bool = True

    @property
    def ok(self) -> bool:
        return not self.lost and self.listed_fully

    def text(self) -> str:
        lines = [
            f"copied {printable(sid)} ({count} events"
            + (f"; {dropped} damaged trailing record(s) dropped" if dropped else "")
            + ")"
            for sid, count, dropped in self.copied
        ]
        lines += [f"unreadable {printable(sid)}: {printable(why)}" for sid, why in self.lost]
        if not self.listed_fully:
            lines.append("the list of sessions is damaged too: sessions on its bad pages are lost")
        total = len(self.copied) + len(self.lost)
        lines.append(f"salvaged {len(self.copied)} of {total} sessions into {self.dest}")
        return "\n".join(lines) + "\n"


async def salvage(source: str, dest: str) -> SalvageReport:
    scheme, path = store_location(source)
    _, dest_path = store_location(dest)
    if not path.exists():
        raise StoreNotFoundError(f"no session store at {path} (nothing was stored there)")
    if os.path.realpath(dest_path) == os.path.realpath(path):
        raise SalvageTargetError("--salvage DEST must be a new store, not the damaged one")
    if os.path.lexists(dest_path):  # a dangling link would be written through
        raise SalvageTargetError(
            f"--salvage {dest}: {dest_path} exists already; name a store that does not exist"
        )
    report = SalvageReport(dest)
    if scheme == "sqlite":
        readable = await asyncio.to_thread(_read_sqlite, str(path), report)
    else:
        readable = await _read_backend(source, report)
    target = open_persistence(dest)
    try:
        for stored in readable:
            if not stored.events:
                # Its scope was never stored: resumed, it would take the default scope.
                report.lost.append((stored.header.id, NO_EVENTS))
                continue
            await target.create(stored.header)
            await target.append(stored.header.id, stored.events)
            report.copied.append((stored.header.id, len(stored.events), stored.repair.dropped_tail))
    finally:
        await target.close()
    return report


def _read_sqlite(path: str, report: SalvageReport) -> list[StoredSession]:
    conn = read_only(path)
    try:
        ids, report.listed_fully = session_ids(conn)
        return _each(ids, lambda sid: read_view(conn, sid), report)
    finally:
        conn.close()


async def _read_backend(source: str, report: SalvageReport) -> list[StoredSession]:
    async with opened_store(source, existing=True) as persistence:
        ids = [header.id for header in await persistence.list()]
        readable: list[StoredSession] = []
        for sid in ids:
            try:
                readable.append(await persistence.inspect(sid))
            except TetherError as err:
                report.lost.append((sid, f"{err.code}: {err}"))
        return readable


def _each(
    ids: list[str], read: Callable[[str], StoredSession], report: SalvageReport
) -> list[StoredSession]:
    readable = []
    for sid in ids:
        try:
            readable.append(read(sid))
        except sqlite3.Error as err:
            report.lost.append((sid, f"{type(err).__name__}: {err}"))
        except TetherError as err:
            report.lost.append((sid, f"{err.code}: {err}"))
    return readable
