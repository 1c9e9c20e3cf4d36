"""Durable sessions: events, the session log, the store and persistence."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from tether._lazy_names import lazy_names

if TYPE_CHECKING:
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

_HOMES: Final[dict[str, str]] = {
    "CorruptLogError": "tether.session.persistence._base",
    "Event": "tether.session._events",
    "EventLog": "tether.session._session",
    "HasSession": "tether.session._session",
    "JsonObject": "tether.session._json",
    "JsonValue": "tether.session._json",
    "Persistence": "tether.session.persistence._base",
    "PersistenceError": "tether.session.persistence._base",
    "RepairReport": "tether.session.persistence._base",
    "SESSION_FORMAT_VERSION": "tether.session._header",
    "SeqConflictError": "tether.session.persistence._base",
    "Session": "tether.session._session",
    "SessionExistsError": "tether.session.persistence._base",
    "SessionHeader": "tether.session._header",
    "SessionMeta": "tether.session._header",
    "SessionNotFoundError": "tether.session.persistence._base",
    "SessionStore": "tether.session._store",
    "StoredSession": "tether.session.persistence._base",
    "register_event_type": "tether.session._events",
}
"""Where each name is defined (its one home): imported from there on first use
(:mod:`tether._lazy_names`)."""

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

__getattr__ = lazy_names(__name__, _HOMES)
