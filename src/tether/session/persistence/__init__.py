"""Session persistence: the narrow backend interface, the bundled backends, store URLs.

``SqlitePersistence`` is the default; ``JsonlPersistence`` keeps one JSONL file per session.
Every backend, including a user's, can be checked with the conformance kit,
:mod:`tether.testing`. Both bundled backends report each committed batch to
``on_commit`` listeners (:mod:`.commits`), which is how a stream shows only what is durable.
"""

from tether.session.persistence.base import (
    CorruptLogError,
    CreatesWithEvents,
    Persistence,
    PersistenceError,
    RepairReport,
    SeqConflictError,
    SessionExistsError,
    SessionNotFoundError,
    StoredSession,
)
from tether.session.persistence.commits import (
    Commit,
    CommitListener,
    CommitsNotReportedError,
    ReportsCommits,
    commits_of,
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
    "Commit",
    "CommitListener",
    "CommitsNotReportedError",
    "CorruptLogError",
    "CreatesWithEvents",
    "InvalidStoreUrlError",
    "JsonlPersistence",
    "Persistence",
    "PersistenceError",
    "RepairReport",
    "ReportsCommits",
    "SeqConflictError",
    "SessionExistsError",
    "SessionNotFoundError",
    "SqlitePersistence",
    "StoredSession",
    "Synchronous",
    "commits_of",
    "default_store_url",
    "open_persistence",
    "plan_repair",
    "sqlite_url",
    "store_location",
]
