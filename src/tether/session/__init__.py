"""Durable sessions: events, the session log, the store and persistence."""

from tether.session._events import Event, register_event_type
from tether.session._header import SESSION_FORMAT_VERSION, SessionHeader, SessionMeta
from tether.session._json import JsonObject, JsonValue
from tether.session._session import EventLog, HasSession, Session
from tether.session._store import SessionStore
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

__all__ = [
    "SESSION_FORMAT_VERSION",
    "CorruptLogError",
    "Event",
    "EventLog",
    "HasSession",
    "JsonObject",
    "JsonValue",
    "Persistence",
    "PersistenceError",
    "RepairReport",
    "SeqConflictError",
    "Session",
    "SessionExistsError",
    "SessionHeader",
    "SessionMeta",
    "SessionNotFoundError",
    "SessionStore",
    "StoredSession",
    "register_event_type",
]
