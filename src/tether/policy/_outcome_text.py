"""What every refused ask says: one function over :class:`ApprovalOutcome` and :class:`AskFailure`.

Three paths ask, and each names what it asked about in its own words:

- :class:`ToolAsk`: a ``tools/pre-execute`` ``ask`` for one tool call (``tools/_pipeline.py``);
- :class:`EscalationAsk`: a call's sandbox escalation (``policy/_escalation.py``);
- :class:`RoutedAsk`: a subagent's question routed to its root session
  (``plugins/_root_approvals.py``).

:func:`outcome_text` turns how the ask ended into the model-facing reason: the content of the
error result, the denial reason and the parent's notice all use it. The outcomes that allow
have no text and the :data:`Refusal` type leaves them out. A ``deny`` permission rule's
refusal names the rule (:func:`rule_refusal_text`). The texts are a contract (tests pin
each one); a new path adds a subject here rather than its own wording.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal, assert_never

from tether.policy._events import RuleCited
from tether.policy._modes import ApprovalOutcome, AskFailure, EffectNoun, SandboxMode

Refusal = (
    Literal[ApprovalOutcome.REJECTED, ApprovalOutcome.CANCELLED, ApprovalOutcome.UNAVAILABLE]
    | AskFailure
)
"""Every way an ask ends without a grant."""


@dataclass(frozen=True, slots=True)
class ToolAsk:
    """An ask to run one tool call."""

    tool: str


@dataclass(frozen=True, slots=True)
class EscalationAsk:
    """An ask to run one call under the wider sandbox ``mode``."""

    mode: SandboxMode
    noun: EffectNoun


@dataclass(frozen=True, slots=True)
class RoutedAsk:
    """A subagent's ask for ``tool``, routed to its root; ``decider`` is the session that decided
    (when one was found)."""

    tool: str
    decider: str | None = None


Asked = ToolAsk | EscalationAsk | RoutedAsk

_NO_CHANNEL: Final[Mapping[Refusal, str]] = MappingProxyType(
    {
        ApprovalOutcome.UNAVAILABLE: "no approval channel is available",
        AskFailure.NO_APPROVAL: "no approval service is composed",
        AskFailure.NO_AGENT: "the call has no agent to route it through",
        AskFailure.NO_AGENTS: "no agents registry is composed to find the root session",
        AskFailure.BROKEN_LINEAGE: "no live ancestor of this subagent was found",
    }
)
"""Why nobody could answer, completing ``<subject> requires approval, but …``."""


def rule_refusal_text(asked: Asked, rule: RuleCited) -> str:
    """The reason a ``deny`` rule gives: what was refused, and the rule, with where it came
    from (``docs/guide-permissions.md``, "Permission rules")."""
    match asked:
        case ToolAsk(tool):
            subject = f'tool "{tool}"'
        case EscalationAsk(mode, noun):
            subject = f'escalating this {noun} to "{mode.value}"'
        case RoutedAsk(tool, _):
            subject = f'this subagent\'s "{tool}" call'
        case _:
            assert_never(asked)
    return f"{subject} is refused by the {rule.describe()}"


def outcome_text(ended: Refusal, asked: Asked, *, detail: str | None = None) -> str:
    """The reason a refused ask gives; ``detail`` is what a failed request (``error``) raised,
    or what the answerer did (``answerer-failed``: :meth:`AnswererFailure.describe
    <tether.policy._events.AnswererFailure.describe>`)."""
    own: dict[Refusal, str] = {}
    match asked:
        case ToolAsk(tool):
            subject = f'tool "{tool}"'
            needs = f"{subject} requires approval, but"
            rejected = f"the user rejected {subject}"
            approval = f"approval for {subject}"
            # Stands in only when the asking hook gave no reason of its own (the pipeline
            # shows that reason instead).
            own[AskFailure.NO_APPROVAL] = f"{subject} requires approval (not yet supported)"
        case EscalationAsk(mode, noun):
            needs = f'sandbox escalation to "{mode.value}" requires approval, but'
            rejected = f'the user rejected escalating this {noun} to "{mode.value}"'
            approval = f'approval for escalating to "{mode.value}"'
        case RoutedAsk(tool, decider):
            needs = f'"{tool}" needs the root session\'s approval, but'
            rejected = f"the root session's user rejected this subagent's \"{tool}\" call"
            approval = f'the routed approval for "{tool}"'
            own[ApprovalOutcome.UNAVAILABLE] = f"{needs} no approval channel is available there"
            own[AskFailure.NEVER] = (
                f"{needs} session {decider} does not take approval questions (approval policy "
                '"never"), so it was rejected without asking'
            )
            own[AskFailure.ERROR] = f"{needs} the routed request failed: {detail}"
            own[AskFailure.ANSWERER_FAILED] = (
                f"{needs} the approver configured there {detail}, so it is unavailable"
            )
        case _:
            assert_never(asked)
    if ended in own:
        return own[ended]
    match ended:
        case ApprovalOutcome.REJECTED | AskFailure.NEVER:
            return rejected
        case ApprovalOutcome.CANCELLED:
            return f"{approval} was cancelled"
        case AskFailure.ERROR:
            return f"{approval} failed: {detail}"
        case AskFailure.UNKNOWN_OUTCOME:
            return f"{approval} returned an unknown outcome"
        case AskFailure.ANSWERER_FAILED:
            return f"{needs} the configured approver {detail}, so it is unavailable"
        case (
            ApprovalOutcome.UNAVAILABLE
            | AskFailure.NO_APPROVAL
            | AskFailure.NO_AGENT
            | AskFailure.NO_AGENTS
            | AskFailure.BROKEN_LINEAGE
        ):
            return f"{needs} {_NO_CHANNEL[ended]}"
        case _:
            assert_never(ended)


__all__ = [
    "Asked",
    "EscalationAsk",
    "Refusal",
    "RoutedAsk",
    "ToolAsk",
    "outcome_text",
    "rule_refusal_text",
]
