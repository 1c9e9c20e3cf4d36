"""The policy layer's event payloads: one typed definition per event type it writes.

Each definition is the payload of one event type: ``from_data`` reads a stored payload and
fails closed (a guessed knob could widen what a resumed session may do); ``to_data`` is what
the owning write path appends, key for key as it always was, so stored logs do not change. A
mode, a policy or a source outside its vocabulary raises that vocabulary's own error
(``INVALID_MODE``, ``INVALID_POLICY``, ``INVALID_POLICY_SOURCE``); any other misfit raises
:class:`InvalidPolicyEventError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Final, Self

from tether.policy.errors import InvalidPolicyEventError
from tether.policy.modes import (
    ApprovalOutcome,
    ApprovalPolicy,
    PolicySource,
    SandboxMode,
    as_outcome,
    parse_approval_policy,
    parse_policy_source,
    parse_sandbox_mode,
)
from tether.session import JsonObject, JsonValue

SANDBOX_MODE: Final = "sandbox/mode"
APPROVAL_POLICY: Final = "approval/policy"
PERMISSION_PRESET: Final = "permission/preset"
APPROVAL_ASKED: Final = "approval/asked"
APPROVAL_DECIDED: Final = "approval/decided"


def _text(data: JsonObject, event_type: str, key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise InvalidPolicyEventError(
            f"{event_type} payload: {key!r} must be a string, got {value!r}"
        )
    return value


def _optional_text(data: JsonObject, event_type: str, key: str) -> str | None:
    return None if data.get(key) is None else _text(data, event_type, key)


def _with_source(data: dict[str, JsonValue], source: PolicySource | None) -> JsonObject:
    if source is not None:
        data["source"] = source
    return data


@dataclass(frozen=True, slots=True)
class SandboxModeSet:
    """``sandbox/mode {mode, source?}``: the session's sandbox mode from this event on."""

    TYPE: ClassVar[str] = SANDBOX_MODE
    mode: SandboxMode
    source: PolicySource | None = None

    @classmethod
    def from_data(cls, data: JsonObject) -> Self:
        return cls(parse_sandbox_mode(data.get("mode")), parse_policy_source(data.get("source")))

    def to_data(self) -> JsonObject:
        return _with_source({"mode": self.mode.value}, self.source)


@dataclass(frozen=True, slots=True)
class ApprovalPolicySet:
    """``approval/policy {policy, source?}``: the session's approval policy from this event on."""

    TYPE: ClassVar[str] = APPROVAL_POLICY
    policy: ApprovalPolicy
    source: PolicySource | None = None

    @classmethod
    def from_data(cls, data: JsonObject) -> Self:
        return cls(
            parse_approval_policy(data.get("policy")), parse_policy_source(data.get("source"))
        )

    def to_data(self) -> JsonObject:
        return _with_source({"policy": self.policy.value}, self.source)


@dataclass(frozen=True, slots=True)
class PermissionPresetSet:
    """``permission/preset {preset}``: the label the user chose over the two knobs."""

    TYPE: ClassVar[str] = PERMISSION_PRESET
    preset: str

    @classmethod
    def from_data(cls, data: JsonObject) -> Self:
        return cls(_text(data, PERMISSION_PRESET, "preset"))

    def to_data(self) -> JsonObject:
        return {"preset": self.preset}


@dataclass(frozen=True, slots=True)
class ApprovalAsked:
    """``approval/asked {id, tool_name, call_id?, reason?, routed_to?, action?}``: the first
    half of the audit pair. ``routed_to`` is the deciding root's session id; ``action`` is the
    stored form of what would run (``AskedAction.to_data`` in ``policy/approval.py``)."""

    TYPE: ClassVar[str] = APPROVAL_ASKED
    id: str
    tool_name: str
    call_id: str | None = None
    reason: str | None = None
    routed_to: str | None = None
    action: JsonObject | None = None

    @classmethod
    def from_data(cls, data: JsonObject) -> Self:
        action = data.get("action")
        if action is not None and not isinstance(action, Mapping):
            raise InvalidPolicyEventError(
                f"{APPROVAL_ASKED} payload: 'action' must be an object, got {action!r}"
            )
        return cls(
            _text(data, APPROVAL_ASKED, "id"),
            _text(data, APPROVAL_ASKED, "tool_name"),
            _optional_text(data, APPROVAL_ASKED, "call_id"),
            _optional_text(data, APPROVAL_ASKED, "reason"),
            _optional_text(data, APPROVAL_ASKED, "routed_to"),
            action,
        )

    def to_data(self) -> JsonObject:
        data: dict[str, JsonValue] = {"id": self.id, "tool_name": self.tool_name}
        optional = {
            "call_id": self.call_id,
            "reason": self.reason,
            "routed_to": self.routed_to,
            "action": self.action,
        }
        data.update({key: value for key, value in optional.items() if value is not None})
        return data


@dataclass(frozen=True, slots=True)
class ApprovalDecided:
    """``approval/decided {id, outcome, answered_by?, repaired?}``: the second half of the
    audit pair. ``repaired`` marks the ``unavailable`` decision the session store's crash repair
    writes for an ask a crash left open (``session/persistence/repair.py``, a lower layer that
    spells the payload itself)."""

    TYPE: ClassVar[str] = APPROVAL_DECIDED
    id: str
    outcome: ApprovalOutcome
    answered_by: str | None = None
    repaired: bool = False

    @classmethod
    def from_data(cls, data: JsonObject) -> Self:
        outcome = as_outcome(data.get("outcome"))
        if outcome is None:
            raise InvalidPolicyEventError(
                f"{APPROVAL_DECIDED} payload: outcome {data.get('outcome')!r} is not an approval "
                f"outcome (accepted: {', '.join(ApprovalOutcome)})"
            )
        repaired = data.get("repaired", False)
        if not isinstance(repaired, bool):
            raise InvalidPolicyEventError(
                f"{APPROVAL_DECIDED} payload: 'repaired' must be a boolean, got {repaired!r}"
            )
        return cls(
            _text(data, APPROVAL_DECIDED, "id"),
            outcome,
            _optional_text(data, APPROVAL_DECIDED, "answered_by"),
            repaired,
        )

    def to_data(self) -> JsonObject:
        data: dict[str, JsonValue] = {"id": self.id, "outcome": self.outcome.value}
        if self.answered_by is not None:
            data["answered_by"] = self.answered_by
        if self.repaired:
            data["repaired"] = True
        return data


__all__ = [
    "APPROVAL_ASKED",
    "APPROVAL_DECIDED",
    "APPROVAL_POLICY",
    "PERMISSION_PRESET",
    "SANDBOX_MODE",
    "ApprovalAsked",
    "ApprovalDecided",
    "ApprovalPolicySet",
    "PermissionPresetSet",
    "SandboxModeSet",
]
