"""How a routed question's ending is told: the denial reason (through ``outcome_text``) and the
outcome the escalation ladder is answered with."""

from __future__ import annotations

import pytest

from tether.plugins._root_approvals import Routed, denial_reason
from tether.policy._modes import ApprovalOutcome, AskFailure

NEEDS = '"write" needs the root session\'s approval, but'


@pytest.mark.parametrize(
    ("routed", "reason"),
    [
        (
            Routed(ApprovalOutcome.REJECTED, "root"),
            "the root session's user rejected this subagent's \"write\" call",
        ),
        (
            Routed(AskFailure.NEVER, "root"),
            f"{NEEDS} session root does not take approval questions (approval policy "
            '"never"), so it was rejected without asking',
        ),
        (
            Routed(ApprovalOutcome.CANCELLED, "root"),
            'the routed approval for "write" was cancelled',
        ),
        (
            Routed(ApprovalOutcome.UNAVAILABLE, "root"),
            f"{NEEDS} no approval channel is available there",
        ),
        (Routed(AskFailure.NO_APPROVAL), f"{NEEDS} no approval service is composed"),
        (
            Routed(AskFailure.NO_AGENTS),
            f"{NEEDS} no agents registry is composed to find the root session",
        ),
        (Routed(AskFailure.BROKEN_LINEAGE), f"{NEEDS} no live ancestor of this subagent was found"),
        (
            Routed(AskFailure.ERROR, "root", "PERSISTENCE_ERROR: disk full"),
            f"{NEEDS} the routed request failed: PERSISTENCE_ERROR: disk full",
        ),
    ],
)
def test_each_ending_has_its_denial_reason(routed: Routed, reason: str) -> None:
    assert denial_reason("write", routed) == reason


def test_a_granted_question_has_no_denial_reason() -> None:
    with pytest.raises(ValueError, match='the routed question for "write" was allowed'):
        denial_reason("write", Routed(ApprovalOutcome.ALLOWED_ONCE, "root"))


@pytest.mark.parametrize(
    ("ending", "outcome"),
    [
        (ApprovalOutcome.ALLOWED_ONCE, ApprovalOutcome.ALLOWED_ONCE),
        (ApprovalOutcome.REJECTED, ApprovalOutcome.REJECTED),
        (ApprovalOutcome.CANCELLED, ApprovalOutcome.CANCELLED),
        (ApprovalOutcome.UNAVAILABLE, ApprovalOutcome.UNAVAILABLE),
        (AskFailure.NEVER, ApprovalOutcome.REJECTED),
        (AskFailure.NO_APPROVAL, ApprovalOutcome.UNAVAILABLE),
        (AskFailure.NO_AGENT, ApprovalOutcome.UNAVAILABLE),
        (AskFailure.NO_AGENTS, ApprovalOutcome.UNAVAILABLE),
        (AskFailure.BROKEN_LINEAGE, ApprovalOutcome.UNAVAILABLE),
        (AskFailure.ERROR, ApprovalOutcome.UNAVAILABLE),
        (AskFailure.UNKNOWN_OUTCOME, ApprovalOutcome.UNAVAILABLE),
    ],
)
def test_the_ladder_is_answered_with_an_approval_outcome(
    ending: ApprovalOutcome | AskFailure, outcome: ApprovalOutcome
) -> None:
    assert Routed(ending, "root").as_escalation_outcome() is outcome
