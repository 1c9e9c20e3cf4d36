"""A damaged SQLite store (a truncated file, garbage, a bad page): what is still readable.

SQLite reports a damaged file as ``database disk image is malformed`` or ``file is not a
database`` and stops. Every command would then fail with those words alone; instead the store
is named, the sessions that can still be read in full are listed, and ``tether sessions fsck
--salvage DEST`` copies them into a new store. A session is readable when its header and every
one of its events read back; a session with any unreadable page is left out whole, never
copied in part (a copy missing a decision could read as a different history).

Reading opens the file read-only (``mode=ro``): the damaged file is evidence, and is never
written.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from tether.session.persistence._base import PersistenceError, StoredSession

DAMAGED_CODES: Final = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})
SHOWN_IDS: Final = 10
"""How many readable session ids a damaged-store message lists before ``and N more``."""


class DamagedStoreError(PersistenceError):
    """The SQLite file itself is damaged; the message names the readable sessions."""

    code = "STORE_DAMAGED"


def is_damage(err: BaseException) -> bool:
    return isinstance(err, sqlite3.DatabaseError) and (
        getattr(err, "sqlite_errorcode", None) in DAMAGED_CODES
        or "malformed" in str(err)
        or "not a database" in str(err)
    )


@dataclass(frozen=True, slots=True)
class Survey:
    """What a damaged file still holds."""

    readable: tuple[str, ...]
    unreadable: tuple[str, ...]
    listed_fully: bool
    """Whether the list of sessions itself read to its end (else more may be lost)."""


def read_only(path: str) -> sqlite3.Connection:
    uri = "file:" + os.path.abspath(path).replace("?", "%3f").replace("#", "%23") + "?mode=ro"
    return sqlite3.connect(uri, uri=True, isolation_level=None)


def session_ids(conn: sqlite3.Connection) -> tuple[list[str], bool]:
    """The ids the ``sessions`` table still yields, from both ends (a bad page in the middle
    hides only what lies on it), and whether the scan got through whole."""
    found: list[str] = []
    for order in ("ASC", "DESC"):
        try:
            for (session_id,) in conn.execute(f"SELECT id FROM sessions ORDER BY rowid {order}"):
                if session_id not in found:
                    found.append(str(session_id))
            return found, True
        except sqlite3.DatabaseError:
            continue
    return found, False


def survey(path: str, read: Callable[[sqlite3.Connection, str], StoredSession]) -> Survey:
    """Try every session ``read`` can read from the damaged file at ``path``."""
    try:
        conn = read_only(path)
    except sqlite3.Error:
        return Survey((), (), False)
    try:
        ids, whole = session_ids(conn)
        readable, unreadable = [], []
        for session_id in ids:
            try:
                read(conn, session_id)
            except (sqlite3.Error, PersistenceError, ValueError):
                unreadable.append(session_id)
            else:
                readable.append(session_id)
        return Survey(tuple(readable), tuple(unreadable), whole)
    finally:
        conn.close()


def damaged_message(where: str, path: str, err: BaseException, found: Survey) -> str:
    if not found.readable:
        still = "no session can be read from it"
    else:
        shown = ", ".join(found.readable[:SHOWN_IDS])
        more = len(found.readable) - SHOWN_IDS
        still = (
            f"{len(found.readable)} of {len(found.readable) + len(found.unreadable)} sessions "
            f"{'' if found.listed_fully else 'listed '}can still be read ({shown}"
            f"{f' and {more} more' if more > 0 else ''})"
        )
    return (
        f"{where} is damaged ({err}); {still}. Copy what can be read into a new store with: "
        f"tether sessions fsck --salvage sqlite:////NEW/PATH.db --store sqlite:///{path}"
    )


__all__ = [
    "DamagedStoreError",
    "Survey",
    "damaged_message",
    "is_damage",
    "read_only",
    "survey",
]
