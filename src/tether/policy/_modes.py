"""The fixed policy vocabulary: sandbox modes, the escalation ladder, approval policies, outcomes
and ask failures.

Every value that reaches a session log or a config file is parsed here, so a typo fails with
the list of accepted values instead of silently meaning something else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Final, Literal, get_args

from tether.policy._errors import InvalidModeError, InvalidPolicyError, InvalidSourceError


class SandboxMode(StrEnum):
    """What confined commands and file tools may modify. File effects only: no backend claims
    to restrict the network."""

    READ_ONLY = "read-only"
    """Nothing may be modified (writes only to ``/dev/null``)."""
    WORKSPACE_WRITE = "workspace-write"
    """Files under the session workspace (plus the temp areas the backend needs) may change."""
    DANGER_FULL_ACCESS = "danger-full-access"
    """The sandbox does not restrict file modifications at all."""


WIDER_MODES: Final[Mapping[SandboxMode, frozenset[SandboxMode]]] = MappingProxyType(
    {
        SandboxMode.READ_ONLY: frozenset(
            {SandboxMode.WORKSPACE_WRITE, SandboxMode.DANGER_FULL_ACCESS}
        ),
        SandboxMode.WORKSPACE_WRITE: frozenset({SandboxMode.DANGER_FULL_ACCESS}),
        SandboxMode.DANGER_FULL_ACCESS: frozenset(),
    }
)
"""The ladder: for each mode, the modes strictly wider than it."""

ESCALATION_TARGETS: Final[tuple[SandboxMode, ...]] = (
    SandboxMode.WORKSPACE_WRITE,
    SandboxMode.DANGER_FULL_ACCESS,
)
"""The values a tool may advertise for ``sandbox_permissions``, narrowest first."""


def is_strictly_wider(target: SandboxMode | str, current: SandboxMode | str) -> bool:
    """True when ``target`` grants more than ``current`` (equal is not wider)."""
    return parse_sandbox_mode(target) in WIDER_MODES[parse_sandbox_mode(current)]


def narrowest_wider_mode(current: SandboxMode | str) -> SandboxMode | None:
    """The next rung up the ladder (what a denial hint suggests), or ``None`` at the top."""
    wider = WIDER_MODES[parse_sandbox_mode(current)]
    return next((mode for mode in ESCALATION_TARGETS if mode in wider), None)


class ApprovalPolicy(StrEnum):
    """Whether a session may ask anyone to approve an action."""

    ASK = "ask"
    """Ask through the configured answerers; without one the request fails closed."""
    NEVER = "never"
    """Approval prompts are disabled: every request is rejected before any answerer runs."""


class ApprovalOutcome(StrEnum):
    """The closed set of answers to one approval request. The three ``allowed-*`` outcomes let
    the asked action run, once; the two wider ones also record a grant with an explicit scope
    (``policy/_grants.py``), which later asks that the scope covers are decided by."""

    ALLOWED_ONCE = "allowed-once"
    """The asked action may run, once; nothing is remembered."""
    ALLOWED_FOR_SESSION = "allowed-for-session"
    """The asked action may run, and so may every later action of the deciding session that
    the grant's scope covers (an ``approval/grant`` in that session's log)."""
    ALLOWED_ALWAYS = "allowed-always"
    """As ``allowed-for-session``, and the scope becomes an ``allow`` rule in the user's own
    configuration for the workspace, so later sessions there are not asked either."""
    REJECTED = "rejected"
    """Someone (or the ``never`` policy) said no."""
    CANCELLED = "cancelled"
    """The request was aborted before an answer arrived."""
    UNAVAILABLE = "unavailable"
    """Nobody could answer: no answerer, a failing one, a rogue reply, or a timeout."""


ALLOWING: Final[frozenset[ApprovalOutcome]] = frozenset(
    {
        ApprovalOutcome.ALLOWED_ONCE,
        ApprovalOutcome.ALLOWED_FOR_SESSION,
        ApprovalOutcome.ALLOWED_ALWAYS,
    }
)
"""The outcomes that let the asked action run."""

GRANTING: Final[frozenset[ApprovalOutcome]] = frozenset(
    {ApprovalOutcome.ALLOWED_FOR_SESSION, ApprovalOutcome.ALLOWED_ALWAYS}
)
"""The outcomes that also record a grant."""


def allows(outcome: object) -> bool:
    """Whether ``outcome`` lets the asked action run (anything outside the vocabulary does
    not)."""
    return outcome in ALLOWING


class AskFailure(StrEnum):
    """How an ask ended without an :class:`ApprovalOutcome` to report: nobody could be asked, or
    the asking itself failed. Worded beside the outcomes (``policy/_outcome_text.py``); never
    written to a log."""

    NO_APPROVAL = "no-approval"
    """No approval service is composed."""
    NO_AGENT = "no-agent"
    """The call has no agent to ask for."""
    NO_AGENTS = "no-agents"
    """A routed ask found no agents registry to look the root session up in."""
    BROKEN_LINEAGE = "broken-lineage"
    """A routed ask found no live ancestor of the asking subagent."""
    NEVER = "never"
    """The deciding session's approval policy is ``never``: rejected without asking anyone."""
    ERROR = "error"
    """The request raised."""
    UNKNOWN_OUTCOME = "unknown-outcome"
    """The approval service answered with a value outside :class:`ApprovalOutcome`."""
    ANSWERER_FAILED = "answerer-failed"
    """The configured answerer (an approver program) failed, so the ask is ``unavailable``;
    the failure is in ``approval/decided {failure}``."""


EffectNoun = Literal["command", "operation"]
"""How a denial, a rejection and a hint name a tool's action: ``command`` for ``bash``,
``operation`` for the file tools. A tool that declares ``escalation_noun`` takes part in the
escalation ladder (``policy/_escalation.py``)."""


PolicySource = Literal["delegation", "parent"]
"""Who wrote a ``sandbox/mode`` or ``approval/policy`` event, when it was not the session's own
user: ``delegation`` is the scope a parent pinned at spawn; ``parent`` is a later adjustment a
parent made through the ownership fence. Absent means the session's own user or deployment."""

POLICY_SOURCES: Final[tuple[str, ...]] = get_args(PolicySource)


def _accepted(values: Iterable[object]) -> str:
    return ", ".join(str(v) for v in values)


def parse_sandbox_mode(value: object) -> SandboxMode:
    """``value`` as a :class:`SandboxMode`, or :class:`InvalidModeError` naming the accepted."""
    if isinstance(value, str):
        try:
            return SandboxMode(value)
        except ValueError:
            pass
    raise InvalidModeError(
        f"invalid sandbox mode {value!r} (accepted: {_accepted(SandboxMode.__members__.values())})"
    )


def parse_approval_policy(value: object) -> ApprovalPolicy:
    """``value`` as an :class:`ApprovalPolicy`, or :class:`InvalidPolicyError`."""
    if isinstance(value, str):
        try:
            return ApprovalPolicy(value)
        except ValueError:
            pass
    raise InvalidPolicyError(
        f"invalid approval policy {value!r} "
        f"(accepted: {_accepted(ApprovalPolicy.__members__.values())})"
    )


def parse_policy_source(value: object) -> PolicySource | None:
    """``None`` stays ``None``; anything else must be a :data:`PolicySource`."""
    if value is None:
        return None
    if value == "delegation":
        return "delegation"
    if value == "parent":
        return "parent"
    raise InvalidSourceError(
        f"invalid policy event source {value!r} (accepted: {_accepted(POLICY_SOURCES)})"
    )


def as_outcome(value: object) -> ApprovalOutcome | None:
    """``value`` as an :class:`ApprovalOutcome`, or ``None`` when it is not in the vocabulary
    (callers fail closed on ``None``; an answerer's garbage is not an error to raise)."""
    if isinstance(value, str):
        try:
            return ApprovalOutcome(value)
        except ValueError:
            return None
    return None


__all__ = [
    "ALLOWING",
    "ESCALATION_TARGETS",
    "GRANTING",
    "POLICY_SOURCES",
    "WIDER_MODES",
    "ApprovalOutcome",
    "ApprovalPolicy",
    "AskFailure",
    "EffectNoun",
    "PolicySource",
    "SandboxMode",
    "allows",
    "as_outcome",
    "is_strictly_wider",
    "narrowest_wider_mode",
    "parse_approval_policy",
    "parse_policy_source",
    "parse_sandbox_mode",
]
