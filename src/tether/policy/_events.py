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
from typing import ClassVar, Final, Literal, Self, TypeAlias, TypeGuard, get_args

from tether.policy._errors import InvalidPolicyEventError
from tether.policy._modes import (
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
from tether.session._answer_channel import RefusalReason, RefusedAnswer
from tether.session._payload_fields import PayloadFields

_FIELDS: Final = PayloadFields(InvalidPolicyEventError)

_REFUSAL_REASONS: Final = frozenset(
    value for alias in get_args(RefusalReason) for value in get_args(alias)
)


def _outcome(data: JsonObject, event_type: str) -> ApprovalOutcome:
    outcome = as_outcome(data.get("outcome"))
    if outcome is None:
        raise InvalidPolicyEventError(
            f"{event_type} payload: outcome {data.get('outcome')!r} is not an approval outcome "
            f"(accepted: {', '.join(ApprovalOutcome)})"
        )
    return outcome


def _with_source(data: dict[str, JsonValue], source: PolicySource | None) -> JsonObject:
    if source is not None:
        data["source"] = source
    return data


@dataclass(frozen=True, slots=True)
class SandboxModeSet:
    """``sandbox/mode {mode, source?}``: the session's sandbox mode from this event on."""

    TYPE: ClassVar[str] = "sandbox/mode"
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

    TYPE: ClassVar[str] = "approval/policy"
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

    TYPE: ClassVar[str] = "permission/preset"
    preset: str

    @classmethod
    def from_data(cls, data: JsonObject) -> Self:
        return cls(_FIELDS.text(data, cls.TYPE, "preset"))

    def to_data(self) -> JsonObject:
        return {"preset": self.preset}


@dataclass(frozen=True, slots=True)
class ApprovalAsked:
    """``approval/asked {id, tool_name, call_id?, reason?, routed_to?, action?}``: the first
    half of the audit pair. ``routed_to`` is the deciding root's session id; ``action`` is the
    stored form of what would run (``AskedAction.to_data`` in ``policy/_approval.py``)."""

    TYPE: ClassVar[str] = "approval/asked"
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
                f"{cls.TYPE} payload: 'action' must be an object, got {action!r}"
            )
        return cls(
            _FIELDS.text(data, cls.TYPE, "id"),
            _FIELDS.text(data, cls.TYPE, "tool_name"),
            _FIELDS.optional_text(data, cls.TYPE, "call_id"),
            _FIELDS.optional_text(data, cls.TYPE, "reason"),
            _FIELDS.optional_text(data, cls.TYPE, "routed_to"),
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


AnswererFailureKind: TypeAlias = Literal[
    "not-started", "refused", "exit-status", "killed", "timeout", "too-much-output",
    "invalid-output", "unknown-outcome",
]  # fmt: skip
"""How a configured answerer (an approver program) failed to give an outcome."""

_FAILURE_KINDS: Final = frozenset(get_args(AnswererFailureKind))
EXCERPT_CHARS: Final = 200
"""The longest excerpt of an answerer's output a failure keeps (escaped, then cut)."""


def _is_failure_kind(value: object) -> TypeGuard[AnswererFailureKind]:
    return value in _FAILURE_KINDS


@dataclass(frozen=True, slots=True)
class AnswererFailure:
    """``{kind, exit_code?, excerpt?}``: why the configured answerer gave no outcome, recorded in
    ``approval/decided {failure}`` beside the ``unavailable`` it fails closed to. ``excerpt`` is
    the start of what it printed, already escaped (:func:`tether.kernel._printable.printable`)
    and at most :data:`EXCERPT_CHARS` long."""

    kind: AnswererFailureKind
    exit_code: int | None = None
    excerpt: str | None = None

    def describe(self) -> str:
        """What happened, completing ``the configured approver …``."""
        shown = f": {self.excerpt}" if self.excerpt else ""
        match self.kind:
            case "not-started":
                return f"could not be started{shown}"
            case "refused":
                return f"was not run{shown}"
            case "exit-status":
                return f"exited with status {self.exit_code}{shown}"
            case "killed":
                return f"was killed by signal {self.exit_code}"
            case "timeout":
                return "did not answer in time and was stopped"
            case "too-much-output":
                return f"printed more output than an answer can be{shown}"
            case "invalid-output":
                return f"printed something that is not an answer{shown}"
            case "unknown-outcome":
                return f"answered an unknown outcome{shown}"

    @classmethod
    def from_data(cls, data: JsonValue, event_type: str) -> AnswererFailure:
        if not isinstance(data, Mapping):
            raise InvalidPolicyEventError(f"{event_type} payload: 'failure' must be an object")
        kind = data.get("kind")
        if not _is_failure_kind(kind):
            raise InvalidPolicyEventError(
                f"{event_type} payload: failure kind {kind!r} is not one of "
                f"{', '.join(sorted(_FAILURE_KINDS))}"
            )
        exit_code = data.get("exit_code")
        if exit_code is not None and (
            isinstance(exit_code, bool) or not isinstance(exit_code, int)
        ):
            raise InvalidPolicyEventError(
                f"{event_type} payload: failure exit_code must be an integer, got {exit_code!r}"
            )
        return cls(kind, exit_code, _FIELDS.optional_text(data, event_type, "excerpt"))

    def to_data(self) -> JsonObject:
        data: dict[str, JsonValue] = {"kind": self.kind}
        if self.exit_code is not None:
            data["exit_code"] = self.exit_code
        if self.excerpt is not None:
            data["excerpt"] = self.excerpt
        return data


@dataclass(frozen=True, slots=True)
class ApprovalDecided:
    """``approval/decided {id, outcome, answered_by?, repaired?, failure?}``: the second half of
    the audit pair. ``repaired`` marks the ``unavailable`` decision the session store's crash
    repair writes for an ask a crash left open (``session/persistence/_repair.py``, a lower layer
    that spells the payload itself). ``failure`` says why a configured answerer gave no
    outcome (:class:`AnswererFailure`); the outcome is then ``unavailable``."""

    TYPE: ClassVar[str] = "approval/decided"
    id: str
    outcome: ApprovalOutcome
    answered_by: str | None = None
    repaired: bool = False
    failure: AnswererFailure | None = None

    @classmethod
    def from_data(cls, data: JsonObject) -> Self:
        outcome = _outcome(data, cls.TYPE)
        repaired = data.get("repaired", False)
        if not isinstance(repaired, bool):
            raise InvalidPolicyEventError(
                f"{cls.TYPE} payload: 'repaired' must be a boolean, got {repaired!r}"
            )
        failure = data.get("failure")
        return cls(
            _FIELDS.text(data, cls.TYPE, "id"),
            outcome,
            _FIELDS.optional_text(data, cls.TYPE, "answered_by"),
            repaired,
            None if failure is None else AnswererFailure.from_data(failure, cls.TYPE),
        )

    def to_data(self) -> JsonObject:
        data: dict[str, JsonValue] = {"id": self.id, "outcome": self.outcome.value}
        if self.answered_by is not None:
            data["answered_by"] = self.answered_by
        if self.repaired:
            data["repaired"] = True
        if self.failure is not None:
            data["failure"] = self.failure.to_data()
        return data


@dataclass(frozen=True, slots=True)
class ApprovalPendingOpened:
    """``approval/pending {id, state: "pending", child_session, tool_name, call_id?, reason,
    lineage}`` on the deciding root's log: a routed question now waits there. ``lineage`` runs
    from the asking child up to the root."""

    TYPE: ClassVar[str] = "approval/pending"
    STATE: ClassVar[Literal["pending"]] = "pending"
    id: str
    child_session: str
    tool_name: str
    reason: str
    lineage: tuple[str, ...]
    call_id: str | None = None

    @classmethod
    def from_data(cls, data: JsonObject) -> Self:
        lineage = data.get("lineage")
        if not isinstance(lineage, list | tuple) or not all(isinstance(s, str) for s in lineage):
            raise InvalidPolicyEventError(
                f"{cls.TYPE} payload: 'lineage' must be a list of session ids, got {lineage!r}"
            )
        return cls(
            _FIELDS.text(data, cls.TYPE, "id"),
            _FIELDS.text(data, cls.TYPE, "child_session"),
            _FIELDS.text(data, cls.TYPE, "tool_name"),
            _FIELDS.text(data, cls.TYPE, "reason"),
            tuple(str(s) for s in lineage),
            _FIELDS.optional_text(data, cls.TYPE, "call_id"),
        )

    def to_data(self) -> JsonObject:
        data: dict[str, JsonValue] = {
            "id": self.id,
            "state": self.STATE,
            "child_session": self.child_session,
            "tool_name": self.tool_name,
        }
        if self.call_id is not None:
            data["call_id"] = self.call_id
        data["reason"] = self.reason
        data["lineage"] = list(self.lineage)
        return data


@dataclass(frozen=True, slots=True)
class ApprovalPendingClosed:
    """``approval/pending {id, state: "decided", outcome}``: the routed question is settled."""

    TYPE: ClassVar[str] = "approval/pending"
    STATE: ClassVar[Literal["decided"]] = "decided"
    id: str
    outcome: ApprovalOutcome

    @classmethod
    def from_data(cls, data: JsonObject) -> Self:
        return cls(_FIELDS.text(data, cls.TYPE, "id"), _outcome(data, cls.TYPE))

    def to_data(self) -> JsonObject:
        return {"id": self.id, "state": self.STATE, "outcome": self.outcome.value}


def _is_refusal_reason(value: object) -> TypeGuard[RefusalReason]:
    return value in _REFUSAL_REASONS


@dataclass(frozen=True, slots=True)
class ApprovalAnswerRefused:
    """``approval/answer-refused {id, via, reason, detail, pid?, file?, claimed_outcome?}``:
    an answer to approval ``id`` that counted for nothing, written inside the audit pair by the
    answerer that refused it (``plugins/_approval_from_store.py``)."""

    TYPE: ClassVar[str] = "approval/answer-refused"
    id: str
    refusal: RefusedAnswer

    @classmethod
    def from_data(cls, data: JsonObject) -> Self:
        via, reason, pid = data.get("via"), data.get("reason"), data.get("pid")
        if via not in ("socket", "answer-box"):
            raise InvalidPolicyEventError(
                f"{cls.TYPE} payload: 'via' {via!r} is neither 'socket' nor 'answer-box'"
            )
        if not _is_refusal_reason(reason):
            raise InvalidPolicyEventError(
                f"{cls.TYPE} payload: reason {reason!r} is not a refusal reason "
                f"(accepted: {', '.join(sorted(_REFUSAL_REASONS))})"
            )
        if pid is not None and (isinstance(pid, bool) or not isinstance(pid, int)):
            raise InvalidPolicyEventError(
                f"{cls.TYPE} payload: 'pid' must be an integer, got {pid!r}"
            )
        refusal = RefusedAnswer(
            "socket" if via == "socket" else "answer-box",
            reason,
            _FIELDS.text(data, cls.TYPE, "detail"),
            pid,
            _FIELDS.optional_text(data, cls.TYPE, "file"),
            _FIELDS.optional_text(data, cls.TYPE, "claimed_outcome"),
        )
        return cls(_FIELDS.text(data, cls.TYPE, "id"), refusal)

    def to_data(self) -> JsonObject:
        return {"id": self.id, **self.refusal.fields()}


ApprovalPending: TypeAlias = ApprovalPendingOpened | ApprovalPendingClosed
"""The two records ``approval/pending`` holds, told apart by ``state``."""


def read_approval_pending(data: JsonObject) -> ApprovalPending:
    """The record a stored ``approval/pending`` payload holds, by its ``state``."""
    state = data.get("state")
    if state == ApprovalPendingOpened.STATE:
        return ApprovalPendingOpened.from_data(data)
    if state == ApprovalPendingClosed.STATE:
        return ApprovalPendingClosed.from_data(data)
    raise InvalidPolicyEventError(
        f"{ApprovalPendingOpened.TYPE} payload: state {state!r} is neither 'pending' nor 'decided'"
    )


__all__ = [
    "EXCERPT_CHARS",
    "AnswererFailure",
    "AnswererFailureKind",
    "ApprovalAnswerRefused",
    "ApprovalAsked",
    "ApprovalDecided",
    "ApprovalPending",
    "ApprovalPendingClosed",
    "ApprovalPendingOpened",
    "ApprovalPolicySet",
    "PermissionPresetSet",
    "SandboxModeSet",
    "read_approval_pending",
]
