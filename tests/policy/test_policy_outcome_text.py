"""``outcome_text``: the one wording of a refused ask, pinned for every subject and ending.

The expected strings are written out in full (not rebuilt from the module's phrases), so a
change to any text fails here; the pipeline, ladder and routing tests pin the same strings as
the model sees them.
"""

from __future__ import annotations

from typing import get_args

import pytest

from tether.policy._modes import ALLOWING, ApprovalOutcome, AskFailure, SandboxMode
from tether.policy._outcome_text import (
    Asked,
    EscalationAsk,
    Refusal,
    RoutedAsk,
    ToolAsk,
    outcome_text,
)

REJECTED = ApprovalOutcome.REJECTED
CANCELLED = ApprovalOutcome.CANCELLED
UNAVAILABLE = ApprovalOutcome.UNAVAILABLE

TOOL = ToolAsk("write")
ESCALATION = EscalationAsk(SandboxMode.WORKSPACE_WRITE, "operation")
ROUTED = RoutedAsk("bash", "root-1")

NEEDS_TOOL = 'tool "write" requires approval, but'
NEEDS_ESCALATION = 'sandbox escalation to "workspace-write" requires approval, but'
NEEDS_ROOT = '"bash" needs the root session\'s approval, but'

TEXTS: list[tuple[Asked, Refusal, str]] = [
    (TOOL, REJECTED, 'the user rejected tool "write"'),
    (TOOL, AskFailure.NEVER, 'the user rejected tool "write"'),
    (TOOL, CANCELLED, 'approval for tool "write" was cancelled'),
    (TOOL, UNAVAILABLE, f"{NEEDS_TOOL} no approval channel is available"),
    (TOOL, AskFailure.NO_APPROVAL, 'tool "write" requires approval (not yet supported)'),
    (TOOL, AskFailure.NO_AGENT, f"{NEEDS_TOOL} the call has no agent to route it through"),
    (
        TOOL,
        AskFailure.NO_AGENTS,
        f"{NEEDS_TOOL} no agents registry is composed to find the root session",
    ),
    (TOOL, AskFailure.BROKEN_LINEAGE, f"{NEEDS_TOOL} no live ancestor of this subagent was found"),
    (TOOL, AskFailure.ERROR, 'approval for tool "write" failed: disk full'),
    (TOOL, AskFailure.UNKNOWN_OUTCOME, 'approval for tool "write" returned an unknown outcome'),
    (
        TOOL,
        AskFailure.ANSWERER_FAILED,
        f"{NEEDS_TOOL} the configured approver disk full, so it is unavailable",
    ),
    (
        ESCALATION,
        AskFailure.ANSWERER_FAILED,
        f"{NEEDS_ESCALATION} the configured approver disk full, so it is unavailable",
    ),
    (
        ROUTED,
        AskFailure.ANSWERER_FAILED,
        f"{NEEDS_ROOT} the approver configured there disk full, so it is unavailable",
    ),
    (ESCALATION, REJECTED, 'the user rejected escalating this operation to "workspace-write"'),
    (
        ESCALATION,
        AskFailure.NEVER,
        'the user rejected escalating this operation to "workspace-write"',
    ),
    (ESCALATION, CANCELLED, 'approval for escalating to "workspace-write" was cancelled'),
    (ESCALATION, UNAVAILABLE, f"{NEEDS_ESCALATION} no approval channel is available"),
    (ESCALATION, AskFailure.NO_APPROVAL, f"{NEEDS_ESCALATION} no approval service is composed"),
    (
        ESCALATION,
        AskFailure.NO_AGENT,
        f"{NEEDS_ESCALATION} the call has no agent to route it through",
    ),
    (
        ESCALATION,
        AskFailure.NO_AGENTS,
        f"{NEEDS_ESCALATION} no agents registry is composed to find the root session",
    ),
    (
        ESCALATION,
        AskFailure.BROKEN_LINEAGE,
        f"{NEEDS_ESCALATION} no live ancestor of this subagent was found",
    ),
    (
        ESCALATION,
        AskFailure.ERROR,
        'approval for escalating to "workspace-write" failed: disk full',
    ),
    (
        ESCALATION,
        AskFailure.UNKNOWN_OUTCOME,
        'approval for escalating to "workspace-write" returned an unknown outcome',
    ),
    (ROUTED, REJECTED, "the root session's user rejected this subagent's \"bash\" call"),
    (
        ROUTED,
        AskFailure.NEVER,
        f"{NEEDS_ROOT} session root-1 does not take approval questions (approval policy "
        '"never"), so it was rejected without asking',
    ),
    (ROUTED, CANCELLED, 'the routed approval for "bash" was cancelled'),
    (ROUTED, UNAVAILABLE, f"{NEEDS_ROOT} no approval channel is available there"),
    (ROUTED, AskFailure.NO_APPROVAL, f"{NEEDS_ROOT} no approval service is composed"),
    (ROUTED, AskFailure.NO_AGENT, f"{NEEDS_ROOT} the call has no agent to route it through"),
    (
        ROUTED,
        AskFailure.NO_AGENTS,
        f"{NEEDS_ROOT} no agents registry is composed to find the root session",
    ),
    (
        ROUTED,
        AskFailure.BROKEN_LINEAGE,
        f"{NEEDS_ROOT} no live ancestor of this subagent was found",
    ),
    (ROUTED, AskFailure.ERROR, f"{NEEDS_ROOT} the routed request failed: disk full"),
    (
        ROUTED,
        AskFailure.UNKNOWN_OUTCOME,
        'the routed approval for "bash" returned an unknown outcome',
    ),
]


@pytest.mark.parametrize(("asked", "ended", "text"), TEXTS)
def test_every_ending_of_every_subject_has_its_text(
    asked: Asked, ended: Refusal, text: str
) -> None:
    assert outcome_text(ended, asked, detail="disk full") == text


def test_the_table_covers_every_refusal_of_every_subject() -> None:
    refusals = {REJECTED, CANCELLED, UNAVAILABLE, *AskFailure}
    assert set(ApprovalOutcome) - refusals == ALLOWING
    for subject in (TOOL, ESCALATION, ROUTED):
        assert {ended for asked, ended, _ in TEXTS if asked == subject} == refusals
    assert {type(asked) for asked, _, _ in TEXTS} == set(get_args(Asked))


def test_the_subjects_own_words_follow_their_fields() -> None:
    command = EscalationAsk(SandboxMode.DANGER_FULL_ACCESS, "command")
    assert outcome_text(REJECTED, command) == (
        'the user rejected escalating this command to "danger-full-access"'
    )
    assert outcome_text(AskFailure.NEVER, RoutedAsk("edit", "s-9")) == (
        '"edit" needs the root session\'s approval, but session s-9 does not take approval '
        'questions (approval policy "never"), so it was rejected without asking'
    )
    # A request that failed without raising anything shows that nothing was raised.
    assert outcome_text(AskFailure.ERROR, RoutedAsk("edit")) == (
        '"edit" needs the root session\'s approval, but the routed request failed: None'
    )
