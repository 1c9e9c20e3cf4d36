"""Session persistence: the narrow backend interface, the bundled backends, store URLs.

``SqlitePersistence`` is the default; ``JsonlPersistence`` keeps one JSONL file per session;
``MemoryPersistence`` (``memory://``) keeps sessions in this process only, durable nowhere.
Every backend, including a user's, can be checked with the conformance kit,
:mod:`tether.testing`. The bundled backends report each committed batch to ``on_commit``
listeners (:mod:`._commits`), which is how a stream shows only what is committed; the two on
disk defer their syncs to where a durable flush needs one (``DefersSync``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from tether._lazy_names import lazy_names

if TYPE_CHECKING:
    from tether.session.persistence._base import (
        CorruptLogError,
        DefersSync,
        Persistence,
        PersistenceError,
        RepairReport,
        SeqConflictError,
        SessionExistsError,
        SessionNotFoundError,
        StoredSession,
    )
    from tether.session.persistence._factory import default_store_url, open_persistence
    from tether.session.persistence._jsonl import JsonlPersistence
    from tether.session.persistence._memory import MemoryPersistence
    from tether.session.persistence._sqlite import SqlitePersistence, Synchronous

_HOMES: Final[dict[str, str]] = {
    "CorruptLogError": "tether.session.persistence._base",
    "DefersSync": "tether.session.persistence._base",
    "JsonlPersistence": "tether.session.persistence._jsonl",
    "MemoryPersistence": "tether.session.persistence._memory",
    "Persistence": "tether.session.persistence._base",
    "PersistenceError": "tether.session.persistence._base",
    "RepairReport": "tether.session.persistence._base",
    "SeqConflictError": "tether.session.persistence._base",
    "SessionExistsError": "tether.session.persistence._base",
    "SessionNotFoundError": "tether.session.persistence._base",
    "SqlitePersistence": "tether.session.persistence._sqlite",
    "StoredSession": "tether.session.persistence._base",
    "Synchronous": "tether.session.persistence._sqlite",
    "default_store_url": "tether.session.persistence._factory",
    "open_persistence": "tether.session.persistence._factory",
}
"""Where each name is defined (its one home): imported from there on first use
(:mod:`tether._lazy_names`)."""

__all__ = [
    "CorruptLogError",
    "DefersSync",
    "JsonlPersistence",
    "MemoryPersistence",
    "Persistence",
    "PersistenceError",
    "RepairReport",
    "SeqConflictError",
    "SessionExistsError",
    "SessionNotFoundError",
    "SqlitePersistence",
    "StoredSession",
    "Synchronous",
    "default_store_url",
    "open_persistence",
]

__getattr__ = lazy_names(__name__, _HOMES)
