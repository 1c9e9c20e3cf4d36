"""Session persistence: the narrow backend interface, the bundled backends, store URLs.

``SqlitePersistence`` is the default; ``JsonlPersistence`` keeps one JSONL file per session;
``MemoryPersistence`` (``memory://``) keeps sessions in this process only, durable nowhere.
Every backend, including a user's, can be checked with the conformance kit,
:mod:`tether.testing`. The bundled backends report each committed batch to ``on_commit``
listeners (:mod:`._commits`), which is how a stream shows only what is committed; the two on
disk defer their syncs to where a durable flush needs one (``DefersSync``).
"""

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
