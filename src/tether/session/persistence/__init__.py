"""Session persistence: the narrow backend interface, the bundled backends, store URLs.

``SqlitePersistence`` is the default; ``JsonlPersistence`` keeps one JSONL file per session.
Every backend, including a user's, can be checked with the conformance kit,
:mod:`tether.testing`.
"""

from tether.session.persistence.base import (
    CorruptLogError,
    Persistence,
    PersistenceError,
    RepairReport,
    SeqConflictError,
    SessionExistsError,
    SessionNotFoundError,
    StoredSession,
)
from tether.session.persistence.factory import (
    STORE_ENV,
    STORE_URL_FORMS,
    InvalidStoreUrlError,
    default_store_url,
    open_persistence,
    sqlite_url,
    store_location,
)
from tether.session.persistence.jsonl import JsonlPersistence
from tether.session.persistence.repair import TOOL_OUTCOME_UNKNOWN, plan_repair
from tether.session.persistence.sqlite import SqlitePersistence, Synchronous

__all__ = [
    "STORE_ENV",
    "STORE_URL_FORMS",
    "TOOL_OUTCOME_UNKNOWN",
    "CorruptLogError",
    "InvalidStoreUrlError",
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
    "plan_repair",
    "sqlite_url",
    "store_location",
]
