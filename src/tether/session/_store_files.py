"""Every path a session store keeps on disk, wherever the store is.

The sandbox hides all of them from confined commands and from the file tools: an agent that
could read the store would read every session's log, from every workspace, and one that could
write it could forge approvals. The names are the stores' own: a SQLite database with its
``-wal``, ``-shm`` and ``-journal`` files and, beside it, its answer box and lease directory
(named by :class:`~tether.session._answer_box.AnswerBox` and
:class:`~tether.session._lease.Leases`); a JSONL store's directory, which holds both.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final
from urllib.parse import quote

from tether.session._answer_box import AnswerBox
from tether.session._lease import Leases
from tether.session.persistence._factory import (
    StoreInMemoryError,
    sqlite_url,
    store_location,
)
from tether.session.persistence._jsonl import JsonlPersistence
from tether.session.persistence._sqlite import SqlitePersistence

SQLITE_SIDE_FILES: Final = ("-wal", "-shm", "-journal")
"""Suffixes of the files SQLite keeps next to a database (WAL, shared memory, rollback)."""


def store_files(url: str) -> tuple[Path, ...]:
    """The paths the store at ``url`` uses, existing or not (the store itself first; none
    for ``memory://``)."""
    try:
        scheme, path = store_location(url)
    except StoreInMemoryError:
        return ()
    box = AnswerBox.for_store(url).directory
    leases = Leases.for_store(url).directory
    if scheme == "jsonl":
        return (path, box, leases)
    side = tuple(path.with_name(path.name + suffix) for suffix in SQLITE_SIDE_FILES)
    return (path, *side, box, leases)


def store_url_of(persistence: object) -> str | None:
    """The URL of a persistence backend tether knows; ``None`` for others (their files, if
    any, are not known here)."""
    if isinstance(persistence, SqlitePersistence):
        return sqlite_url(persistence.path)
    if isinstance(persistence, JsonlPersistence):
        return "jsonl://" + quote(os.path.abspath(persistence.root))
    return None


def persistence_files(persistence: object) -> tuple[Path, ...]:
    """:func:`store_files` of a persistence backend (``()`` when :func:`store_url_of` does
    not know it)."""
    url = store_url_of(persistence)
    return () if url is None else store_files(url)


__all__ = ["SQLITE_SIDE_FILES", "persistence_files", "store_files", "store_url_of"]
