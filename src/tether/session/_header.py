"""The session header: immutable storage metadata kept outside the event log."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Final, Literal

from tether.errors import TetherError

SESSION_FORMAT_VERSION: Final = 0
"""The format of a stored session: the header's stored form (:meth:`SessionHeader.to_dict`),
the event envelope (:meth:`tether.session._events.Event.to_dict`) and what the payload keys of
each event type mean. An export file is the same format (``surfaces/cli/_archive.py``).

When it changes: bump it with any change that a reader of the current version would misread,
or refuse for a reason other than the version: a header or envelope field added, removed or
renamed, a value that changes meaning, an event payload read differently. No bump for a new
event type (a reader that does not know a required one refuses the session with
``UNKNOWN_EVENT_TYPE``, and keeps an ``ignorable`` one) or for a payload key that a reader
which does not know it loses nothing by skipping.

A newer version: refused (:class:`FormatVersionError`, ``UNSUPPORTED_FORMAT_VERSION``) by
load, inspect and import, checked before any other field, because a newer format may add
fields and "unsupported version" is what the user can act on. Nothing is read in part and
nothing is written.

An older version: read only through migrations, and version 0 is the first, so none exists
yet and any other version is refused. A migration is added with the bump that needs it: a pure
function from the stored header and events of version ``N`` to those of ``N + 1``, applied in
order from the stored version up to this one before validation; writers write only this
version, so a session migrated on load is stored again at this version before anything is
appended to it (a log never mixes versions), while inspect and export migrate in memory only.
Each migration lands with a stored session of the old version as a test fixture that must load
to its expected current form, and ``tests/session/test_session_header.py`` pins the new number
and the refusal of the next one.
"""

Origin = Literal["subagent"]


class InvalidHeaderError(TetherError):
    code = "INVALID_HEADER"


class FormatVersionError(TetherError):
    code = "UNSUPPORTED_FORMAT_VERSION"


@dataclass(frozen=True, slots=True)
class SessionMeta:
    """What a caller may choose when creating a session; the store fills in id and time."""

    cwd: str | None = None
    parent_session: str | None = None
    seed_length: int | None = None
    origin: Origin | None = None
    delegation_depth: int = 0
    agent_preset: str | None = None


@dataclass(frozen=True, slots=True)
class SessionHeader:
    """``delegation_depth`` is 0 at top level and parent + 1 for a subagent.

    ``parent_session`` alone does not mean "is a subagent": a top-level fork carries it too.
    Only the subagent path stamps ``origin`` and a positive ``delegation_depth``.
    """

    id: str
    created_at: int
    cwd: str | None = None
    parent_session: str | None = None
    seed_length: int | None = None
    origin: Origin | None = None
    delegation_depth: int = 0
    agent_preset: str | None = None
    version: int = SESSION_FORMAT_VERSION

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise InvalidHeaderError(f"session id must be a non-empty string, got {self.id!r}")
        if not _is_int(self.created_at):
            raise InvalidHeaderError(f"created_at must be integer epoch ms: {self.created_at!r}")
        if self.cwd is not None and (not isinstance(self.cwd, str) or not os.path.isabs(self.cwd)):
            raise InvalidHeaderError(f"cwd must be an absolute path, got {self.cwd!r}")
        if self.parent_session is not None and not isinstance(self.parent_session, str):
            raise InvalidHeaderError("parent_session must be a string")
        if self.seed_length is not None and (not _is_int(self.seed_length) or self.seed_length < 1):
            raise InvalidHeaderError(
                f"seed_length must be a positive integer: {self.seed_length!r}"
            )
        if self.origin not in (None, "subagent"):
            raise InvalidHeaderError(f"origin must be 'subagent' when present: {self.origin!r}")
        if not _is_int(self.delegation_depth) or self.delegation_depth < 0:
            raise InvalidHeaderError(f"delegation_depth must be >= 0: {self.delegation_depth!r}")
        if self.agent_preset is not None and not isinstance(self.agent_preset, str):
            raise InvalidHeaderError("agent_preset must be a string")
        _check_version(self.id, self.version)

    @classmethod
    def from_meta(cls, session_id: str, created_at: int, meta: SessionMeta) -> SessionHeader:
        return cls(
            id=session_id,
            created_at=created_at,
            cwd=meta.cwd,
            parent_session=meta.parent_session,
            seed_length=meta.seed_length,
            origin=meta.origin,
            delegation_depth=meta.delegation_depth,
            agent_preset=meta.agent_preset,
        )

    def with_id(self, session_id: str) -> SessionHeader:
        return replace(self, id=session_id)

    def to_dict(self) -> dict[str, object]:
        """The stored form. ``delegation_depth`` is always written (0 for top level)."""
        out: dict[str, object] = {
            "type": "session",
            "version": self.version,
            "id": self.id,
            "created_at": self.created_at,
        }
        for key in ("cwd", "parent_session", "seed_length", "origin"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        out["delegation_depth"] = self.delegation_depth
        if self.agent_preset is not None:
            out["agent_preset"] = self.agent_preset
        return out

    @classmethod
    def from_dict(cls, raw: object) -> SessionHeader:
        if not isinstance(raw, Mapping):
            raise InvalidHeaderError("session header must be a JSON object")
        if raw.get("type") != "session":
            raise InvalidHeaderError("session header must have type 'session'")
        if "version" not in raw:
            raise FormatVersionError("session header has no format version")
        # Checked before the fields: a newer format may well add fields, and "unsupported
        # version" is the message a user can act on, not "unknown fields".
        _check_version(raw.get("id"), raw["version"])
        if "delegation_depth" not in raw:
            raise InvalidHeaderError("session header has no delegation_depth (required on disk)")
        known = {
            "type",
            "version",
            "id",
            "created_at",
            "cwd",
            "parent_session",
            "seed_length",
            "origin",
            "delegation_depth",
            "agent_preset",
        }
        extra = set(raw) - known
        if extra:
            raise InvalidHeaderError(f"session header has unknown fields: {sorted(extra)}")
        return cls(
            id=raw.get("id"),  # type: ignore[arg-type]
            created_at=raw.get("created_at"),  # type: ignore[arg-type]
            cwd=raw.get("cwd"),
            parent_session=raw.get("parent_session"),
            seed_length=raw.get("seed_length"),
            origin=raw.get("origin"),
            delegation_depth=raw.get("delegation_depth"),  # type: ignore[arg-type]
            agent_preset=raw.get("agent_preset"),
            version=raw.get("version"),  # type: ignore[arg-type]
        )


def _check_version(session_id: object, version: object) -> None:
    if not _is_int(version) or version != SESSION_FORMAT_VERSION:
        raise FormatVersionError(
            f"session {session_id!r} has format version {version!r}; this tether reads "
            f"only version {SESSION_FORMAT_VERSION} (no migration exists)"
        )


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
