"""Durable sessions: events, the session log, the store and persistence."""

from tether.session.events import (
    CORE_EVENT_TYPES,
    SURFACE_EVENT_TYPES,
    Event,
    InvalidEventError,
    UnknownEventTypeError,
    is_known_event_type,
    register_event_type,
)
from tether.session.header import (
    SESSION_FORMAT_VERSION,
    FormatVersionError,
    InvalidHeaderError,
    SessionHeader,
    SessionMeta,
)
from tether.session.json import JsonObject, JsonValue, PayloadError
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
from tether.session.session import (
    EventLog,
    HasSession,
    SeedError,
    Session,
    has_open_turn,
    wall_clock_ms,
)
from tether.session.store import (
    InvalidBoundaryError,
    NoPersistenceError,
    OpenTurnError,
    SessionNotLiveError,
    SessionStore,
)

__all__ = [
    "CORE_EVENT_TYPES",
    "SESSION_FORMAT_VERSION",
    "SURFACE_EVENT_TYPES",
    "CorruptLogError",
    "Event",
    "EventLog",
    "FormatVersionError",
    "HasSession",
    "InvalidBoundaryError",
    "InvalidEventError",
    "InvalidHeaderError",
    "JsonObject",
    "JsonValue",
    "NoPersistenceError",
    "OpenTurnError",
    "PayloadError",
    "Persistence",
    "PersistenceError",
    "RepairReport",
    "SeedError",
    "SeqConflictError",
    "Session",
    "SessionExistsError",
    "SessionHeader",
    "SessionMeta",
    "SessionNotFoundError",
    "SessionNotLiveError",
    "SessionStore",
    "StoredSession",
    "UnknownEventTypeError",
    "has_open_turn",
    "is_known_event_type",
    "register_event_type",
    "wall_clock_ms",
]
