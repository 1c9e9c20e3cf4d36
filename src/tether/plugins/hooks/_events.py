"""The hooks plugin's event payloads: ``hook/invoked`` and ``hook/result``, one typed definition
each, in the shape of ``policy/_events.py`` and ``agent/_events.py``.

``to_data`` is what the hook service appends, key for key; ``from_data`` is the strict reading
(nothing in tether reads these events back: they are the audit of which hook ran and what it
decided), refusing with :class:`InvalidHookEventError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Final, Self, TypeGuard, get_args

from tether.errors import TetherError
from tether.plugins.hooks._protocol import HookDecision
from tether.plugins.hooks._settings import CLAUDE_CODE, CODEX, Dialect, HookEvent
from tether.session import JsonObject, JsonValue
from tether.session._payload_fields import PayloadFields

_DECISIONS: Final = frozenset(get_args(HookDecision))


class InvalidHookEventError(TetherError):
    """A stored ``hook/invoked`` or ``hook/result`` whose payload does not fit its definition."""

    code = "INVALID_HOOK_EVENT"


_FIELDS: Final = PayloadFields(InvalidHookEventError)


def _point(data: JsonObject, event_type: str) -> HookEvent:
    point = data.get("point")
    for event in HookEvent:
        if event.value == point:
            return event
    raise InvalidHookEventError(
        f"{event_type} payload: point {point!r} is not a hook event "
        f"(accepted: {', '.join(HookEvent)})"
    )


@dataclass(frozen=True, slots=True)
class HookInvoked:
    """``hook/invoked {turn, point, dialect, matcher?, handler_id}``: a hook command starts
    (a background hook's is written with its result, once it finished)."""

    TYPE: ClassVar[str] = "hook/invoked"
    turn: int
    point: HookEvent
    handler_id: str
    matcher: str | None = None
    dialect: Dialect = CLAUDE_CODE

    @classmethod
    def from_data(cls, data: JsonObject) -> Self:
        dialect = data.get("dialect")
        if dialect != CLAUDE_CODE and dialect != CODEX:
            raise InvalidHookEventError(
                f"{cls.TYPE} payload: dialect {dialect!r} is not a hook dialect "
                f"(accepted: {CLAUDE_CODE}, {CODEX})"
            )
        return cls(
            _FIELDS.integer(data, cls.TYPE, "turn"),
            _point(data, cls.TYPE),
            _FIELDS.text(data, cls.TYPE, "handler_id"),
            _FIELDS.optional_text(data, cls.TYPE, "matcher"),
            dialect,
        )

    def to_data(self) -> JsonObject:
        data: dict[str, JsonValue] = {
            "turn": self.turn,
            "point": self.point.value,
            "dialect": self.dialect,
        }
        if self.matcher is not None:
            data["matcher"] = self.matcher
        data["handler_id"] = self.handler_id
        return data


def _is_decision(value: object) -> TypeGuard[HookDecision]:
    return value in _DECISIONS


@dataclass(frozen=True, slots=True)
class HookResult:
    """``hook/result {turn, point, handler_id, decision, exit_code?, stderr_summary?,
    duration_ms}``: what the hook command amounted to."""

    TYPE: ClassVar[str] = "hook/result"
    turn: int
    point: HookEvent
    handler_id: str
    decision: HookDecision
    duration_ms: int
    exit_code: int | None = None
    stderr_summary: str | None = None

    @classmethod
    def from_data(cls, data: JsonObject) -> Self:
        decision = data.get("decision")
        if not _is_decision(decision):
            raise InvalidHookEventError(
                f"{cls.TYPE} payload: decision {decision!r} is not a hook decision "
                f"(accepted: {', '.join(sorted(_DECISIONS))})"
            )
        exit_code = data.get("exit_code")
        return cls(
            _FIELDS.integer(data, cls.TYPE, "turn"),
            _point(data, cls.TYPE),
            _FIELDS.text(data, cls.TYPE, "handler_id"),
            decision,
            _FIELDS.integer(data, cls.TYPE, "duration_ms"),
            None if exit_code is None else _FIELDS.integer(data, cls.TYPE, "exit_code"),
            _FIELDS.optional_text(data, cls.TYPE, "stderr_summary"),
        )

    def to_data(self) -> JsonObject:
        data: dict[str, JsonValue] = {
            "turn": self.turn,
            "point": self.point.value,
            "handler_id": self.handler_id,
            "decision": self.decision,
        }
        if self.exit_code is not None:
            data["exit_code"] = self.exit_code
        if self.stderr_summary is not None:
            data["stderr_summary"] = self.stderr_summary
        data["duration_ms"] = self.duration_ms
        return data


__all__ = ["Dialect", "HookInvoked", "HookResult", "InvalidHookEventError"]
