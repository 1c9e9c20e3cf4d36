"""The policy layer's event payloads: one typed definition per event type it writes.

Each definition is the payload of one event type: ``from_data`` reads a stored payload and
fails closed (a guessed knob could widen what a resumed session may do); ``to_data`` is what
the owning write path appends, key for key as it always was, so stored logs do not change. A
mode, a policy or a source outside its vocabulary raises that vocabulary's own error
(``INVALID_MODE``, ``INVALID_POLICY``, ``INVALID_POLICY_SOURCE``); any other misfit raises
:class:`InvalidPolicyEventError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Final, Literal, Self, TypeAlias, TypeGuard, get_args

from tether.policy._errors import InvalidPolicyEventError
from tether.policy._modes import (
    GRANTING,
    ApprovalOutcome,
    ApprovalPolicy,
    PolicySource,
    SandboxMode,
    as_outcome,
    parse_approval_policy,
    parse_policy_source,
    parse_sandbox_mode,
)
from tether.policy._rules import RULE_DECISIONS, RuleDecision, RuleOrigin, describe_rule
from tether.session import JsonObject, JsonValue
from tether.session._answer_channel import RefusalReason, RefusedAnswer
from tether.session._json import is_mapping
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
        if action is not None and not is_mapping(action):
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
    "invalid-output", "unknown-outcome", "scope-not-offered",
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
            case "scope-not-offered":
                return f"chose a grant the question did not offer{shown}"

    @classmethod
    def from_data(cls, data: JsonValue, event_type: str) -> AnswererFailure:
        if not is_mapping(data):
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


ScopeKind: TypeAlias = Literal["exact", "prefix", "path", "tool"]
"""How wide a grant is, narrowest first: the exact action (a command string, a file); a
command prefix (``npm test`` with any arguments); a path pattern (a directory and everything
under it); a whole tool."""

SCOPE_KINDS: Final[tuple[ScopeKind, ...]] = get_args(ScopeKind)


def _is_scope_kind(value: object) -> TypeGuard[ScopeKind]:
    return value in SCOPE_KINDS


def _optional_mode(data: JsonObject, key: str) -> SandboxMode | None:
    value = data.get(key)
    return None if value is None else parse_sandbox_mode(value)


@dataclass(frozen=True, slots=True)
class GrantScope:
    """``{kind, rule, target_mode?}``: what a grant covers, as a permission rule in Claude
    Code's syntax (``Bash(npm test:*)``), and for an escalation the sandbox mode it allows
    without asking (up to and including)."""

    kind: ScopeKind
    rule: str
    target_mode: SandboxMode | None = None

    @classmethod
    def from_data(cls, data: JsonValue, event_type: str) -> GrantScope:
        if not is_mapping(data):
            raise InvalidPolicyEventError(f"{event_type} payload: 'scope' must be an object")
        kind = data.get("kind")
        if not _is_scope_kind(kind):
            raise InvalidPolicyEventError(
                f"{event_type} payload: scope kind {kind!r} is not one of {', '.join(SCOPE_KINDS)}"
            )
        return cls(
            kind, _FIELDS.text(data, event_type, "rule"), _optional_mode(data, "target_mode")
        )

    def to_data(self) -> JsonObject:
        data: dict[str, JsonValue] = {"kind": self.kind, "rule": self.rule}
        if self.target_mode is not None:
            data["target_mode"] = self.target_mode.value
        return data

    def describe(self) -> str:
        """``Bash(npm test:*)``, with ``, escalating up to danger-full-access`` when it does."""
        up = f", escalating up to {self.target_mode.value}" if self.target_mode else ""
        return f"{self.rule}{up}"


def _is_decision(value: object) -> TypeGuard[RuleDecision]:
    return value in RULE_DECISIONS


@dataclass(frozen=True, slots=True)
class RuleCited:
    """``{decision, rule, origin, file?, escalate?}``: a permission rule as a log records it
    (the rule that decided an ask; a rule a child captured from its parent)."""

    decision: RuleDecision
    rule: str
    origin: RuleOrigin
    file: str | None = None
    escalate: SandboxMode | None = None

    @classmethod
    def from_data(cls, data: JsonValue, event_type: str) -> RuleCited:
        if not is_mapping(data):
            raise InvalidPolicyEventError(f"{event_type} payload: a rule must be an object")
        decision, origin = data.get("decision"), data.get("origin")
        if not _is_decision(decision):
            raise InvalidPolicyEventError(
                f"{event_type} payload: rule decision {decision!r} is not one of "
                f"{', '.join(RULE_DECISIONS)}"
            )
        if origin not in set(RuleOrigin):
            raise InvalidPolicyEventError(
                f"{event_type} payload: rule origin {origin!r} is not one of "
                f"{', '.join(RuleOrigin)}"
            )
        return cls(
            decision,
            _FIELDS.text(data, event_type, "rule"),
            RuleOrigin(str(origin)),
            _FIELDS.optional_text(data, event_type, "file"),
            _optional_mode(data, "escalate"),
        )

    def describe(self) -> str:
        return describe_rule(self.decision, self.rule, self.origin, self.file, self.escalate)

    def to_data(self) -> JsonObject:
        data: dict[str, JsonValue] = {
            "decision": self.decision,
            "rule": self.rule,
            "origin": self.origin.value,
        }
        if self.file is not None:
            data["file"] = self.file
        if self.escalate is not None:
            data["escalate"] = self.escalate.value
        return data


DecidedBy: TypeAlias = Literal["rule", "grant"]
"""What decided an ask without any answerer: a permission rule or a session grant."""


@dataclass(frozen=True, slots=True)
class ApprovalDecided:
    """``approval/decided {id, outcome, answered_by?, repaired?, failure?, decided_by?, rule?,
    grant?, scope?}``: the second half of the audit pair. ``repaired`` marks the
    ``unavailable`` decision the session store's crash repair writes for an ask a crash left
    open (``session/persistence/_repair.py``, a lower layer that spells the payload itself).
    ``failure`` says why a configured answerer gave no outcome (:class:`AnswererFailure`); the
    outcome is then ``unavailable``.

    An ask decided without an answerer says by what: ``decided_by: "rule"`` with the ``rule``
    (a ``deny`` rejects, an ``allow`` allows once), or ``decided_by: "grant"`` with the
    ``grant``'s id and its ``scope``. An answer that granted (``allowed-for-session``,
    ``allowed-always``) has the ``scope`` it chose; its ``approval/grant`` follows."""

    TYPE: ClassVar[str] = "approval/decided"
    id: str
    outcome: ApprovalOutcome
    answered_by: str | None = None
    repaired: bool = False
    failure: AnswererFailure | None = None
    decided_by: DecidedBy | None = None
    rule: RuleCited | None = None
    grant: str | None = None
    scope: GrantScope | None = None

    @classmethod
    def from_data(cls, data: JsonObject) -> Self:
        outcome = _outcome(data, cls.TYPE)
        repaired = data.get("repaired", False)
        if not isinstance(repaired, bool):
            raise InvalidPolicyEventError(
                f"{cls.TYPE} payload: 'repaired' must be a boolean, got {repaired!r}"
            )
        failure, decided_by = data.get("failure"), data.get("decided_by")
        if decided_by not in (None, "rule", "grant"):
            raise InvalidPolicyEventError(
                f"{cls.TYPE} payload: decided_by {decided_by!r} is neither 'rule' nor 'grant'"
            )
        rule, scope = data.get("rule"), data.get("scope")
        return cls(
            _FIELDS.text(data, cls.TYPE, "id"),
            outcome,
            _FIELDS.optional_text(data, cls.TYPE, "answered_by"),
            repaired,
            None if failure is None else AnswererFailure.from_data(failure, cls.TYPE),
            "rule" if decided_by == "rule" else "grant" if decided_by == "grant" else None,
            None if rule is None else RuleCited.from_data(rule, cls.TYPE),
            _FIELDS.optional_text(data, cls.TYPE, "grant"),
            None if scope is None else GrantScope.from_data(scope, cls.TYPE),
        )

    def to_data(self) -> JsonObject:
        data: dict[str, JsonValue] = {"id": self.id, "outcome": self.outcome.value}
        if self.answered_by is not None:
            data["answered_by"] = self.answered_by
        if self.repaired:
            data["repaired"] = True
        if self.failure is not None:
            data["failure"] = self.failure.to_data()
        if self.decided_by is not None:
            data["decided_by"] = self.decided_by
        if self.rule is not None:
            data["rule"] = self.rule.to_data()
        if self.grant is not None:
            data["grant"] = self.grant
        if self.scope is not None:
            data["scope"] = self.scope.to_data()
        return data


@dataclass(frozen=True, slots=True)
class ApprovalGranted:
    """``approval/grant {id, approval_id, outcome, scope, granted_by?, asked_in?, rule_id?,
    error?}`` on the log of the session that decided (the root, for a routed question): a
    grant an answer made. ``asked_in`` names the asking session when it is another (a routed
    child, whose log holds the audit pair; the grant never applies to it). An
    ``allowed-for-session`` grant decides that session's later asks its scope covers, until
    an ``approval/grant-revoked`` names it. An ``allowed-always`` grant is the record of the
    ``allow`` rule ``rule_id`` added to the user's own rules; when that rule could not be
    saved, ``error`` says why and the grant holds for the session instead."""

    TYPE: ClassVar[str] = "approval/grant"
    id: str
    approval_id: str
    outcome: ApprovalOutcome
    scope: GrantScope
    granted_by: str | None = None
    asked_in: str | None = None
    rule_id: str | None = None
    error: str | None = None

    @classmethod
    def from_data(cls, data: JsonObject) -> Self:
        outcome = _outcome(data, cls.TYPE)
        if outcome not in GRANTING:
            raise InvalidPolicyEventError(
                f"{cls.TYPE} payload: outcome {outcome.value!r} makes no grant"
            )
        return cls(
            _FIELDS.text(data, cls.TYPE, "id"),
            _FIELDS.text(data, cls.TYPE, "approval_id"),
            outcome,
            GrantScope.from_data(data.get("scope"), cls.TYPE),
            _FIELDS.optional_text(data, cls.TYPE, "granted_by"),
            _FIELDS.optional_text(data, cls.TYPE, "asked_in"),
            _FIELDS.optional_text(data, cls.TYPE, "rule_id"),
            _FIELDS.optional_text(data, cls.TYPE, "error"),
        )

    def to_data(self) -> JsonObject:
        data: dict[str, JsonValue] = {
            "id": self.id,
            "approval_id": self.approval_id,
            "outcome": self.outcome.value,
            "scope": self.scope.to_data(),
        }
        optional = {
            "granted_by": self.granted_by,
            "asked_in": self.asked_in,
            "rule_id": self.rule_id,
            "error": self.error,
        }
        data.update({key: value for key, value in optional.items() if value is not None})
        return data

    @property
    def for_session(self) -> bool:
        """Whether it decides this session's later asks: a session grant, or an always grant
        whose rule could not be saved."""
        return self.outcome is ApprovalOutcome.ALLOWED_FOR_SESSION or self.rule_id is None


@dataclass(frozen=True, slots=True)
class GrantRevoked:
    """``approval/grant-revoked {id, by}``: session grant ``id`` decides nothing from here on."""

    TYPE: ClassVar[str] = "approval/grant-revoked"
    id: str
    by: str

    @classmethod
    def from_data(cls, data: JsonObject) -> Self:
        return cls(_FIELDS.text(data, cls.TYPE, "id"), _FIELDS.text(data, cls.TYPE, "by"))

    def to_data(self) -> JsonObject:
        return {"id": self.id, "by": self.by}


@dataclass(frozen=True, slots=True)
class PermissionRulesCaptured:
    """``permission/rules {rules, source: "delegation"}`` in a child's log: the ``deny`` and
    ``ask`` rules its parent was bound by when it delegated. They bind the child for its whole
    life, cold resume included; ``allow`` rules and grants are never captured."""

    TYPE: ClassVar[str] = "permission/rules"
    rules: tuple[RuleCited, ...]
    source: PolicySource = "delegation"

    @classmethod
    def from_data(cls, data: JsonObject) -> Self:
        rules = data.get("rules")
        if not isinstance(rules, list | tuple):
            raise InvalidPolicyEventError(f"{cls.TYPE} payload: 'rules' must be a list")
        cited = tuple(RuleCited.from_data(rule, cls.TYPE) for rule in rules)
        if any(rule.decision == "allow" for rule in cited):
            raise InvalidPolicyEventError(f"{cls.TYPE} payload: an allow rule is never captured")
        source = parse_policy_source(data.get("source"))
        if source is None:
            raise InvalidPolicyEventError(f"{cls.TYPE} payload: 'source' is required")
        return cls(cited, source)

    def to_data(self) -> JsonObject:
        return {"rules": [rule.to_data() for rule in self.rules], "source": self.source}


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
    "SCOPE_KINDS",
    "AnswererFailure",
    "AnswererFailureKind",
    "ApprovalAnswerRefused",
    "ApprovalAsked",
    "ApprovalDecided",
    "ApprovalGranted",
    "ApprovalPending",
    "ApprovalPendingClosed",
    "ApprovalPendingOpened",
    "ApprovalPolicySet",
    "DecidedBy",
    "GrantRevoked",
    "GrantScope",
    "PermissionPresetSet",
    "PermissionRulesCaptured",
    "RuleCited",
    "SandboxModeSet",
    "ScopeKind",
    "read_approval_pending",
]
