"""Session persistence: the narrow backend interface, the bundled backends, store URLs.

``SqlitePersistence`` is the default; ``JsonlPersistence`` keeps one JSONL file per session.
Every backend, including a user's, can be checked with the conformance kit,
:mod:`tether.testing`. Both bundled backends report each committed batch to
``on_commit`` listeners (:mod:`._commits`), which is how a stream shows only what is durable.
"""

from tether.session.persistence._base import (
    CorruptLogError,
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
from tether.session.persistence._sqlite import SqlitePersistence, Synchronous

__all__ = [
    "CorruptLogError",
    "JsonlPersistence",
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
