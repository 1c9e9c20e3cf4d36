"""The fixed policy vocabulary and the escalation ladder (``docs/design.md`` §4)."""

from __future__ import annotations

import pytest

from tether.policy import (
    ApprovalOutcome,
    ApprovalPolicy,
    SandboxMode,
    is_strictly_wider,
    parse_approval_policy,
    parse_sandbox_mode,
)
from tether.policy._errors import InvalidModeError, InvalidPolicyError, InvalidSourceError
from tether.policy._modes import (
    ESCALATION_TARGETS,
    POLICY_SOURCES,
    WIDER_MODES,
    as_outcome,
    narrowest_wider_mode,
    parse_policy_source,
)

RO, WW, DFA = SandboxMode.READ_ONLY, SandboxMode.WORKSPACE_WRITE, SandboxMode.DANGER_FULL_ACCESS


def test_the_vocabularies_are_closed_and_spelled_like_the_reference() -> None:
    assert [m.value for m in SandboxMode] == ["read-only", "workspace-write", "danger-full-access"]
    assert [p.value for p in ApprovalPolicy] == ["ask", "never"]
    assert [o.value for o in ApprovalOutcome] == [
        "allowed-once",
        "allowed-for-session",
        "allowed-always",
        "rejected",
        "cancelled",
        "unavailable",
    ]
    assert POLICY_SOURCES == ("delegation", "parent")


def test_the_ladder() -> None:
    assert dict(WIDER_MODES) == {RO: {WW, DFA}, WW: {DFA}, DFA: set()}
    assert ESCALATION_TARGETS == (WW, DFA)
    wider = {(t, c) for t in SandboxMode for c in SandboxMode if is_strictly_wider(t, c)}
    assert wider == {(WW, RO), (DFA, RO), (DFA, WW)}
    assert is_strictly_wider("danger-full-access", "workspace-write")
    assert [narrowest_wider_mode(m) for m in SandboxMode] == [WW, DFA, None]


def test_parsing_accepts_strings_and_members() -> None:
    assert parse_sandbox_mode("read-only") is RO
    assert parse_sandbox_mode(WW) is WW
    assert parse_approval_policy("never") is ApprovalPolicy.NEVER
    assert parse_policy_source(None) is None
    assert parse_policy_source("delegation") == "delegation"
    assert parse_policy_source("parent") == "parent"


@pytest.mark.parametrize("bad", ["Read-Only", "full", "", None, 1, ["read-only"]])
def test_a_bad_mode_names_the_accepted_values(bad: object) -> None:
    with pytest.raises(InvalidModeError) as info:
        parse_sandbox_mode(bad)
    assert info.value.code == "INVALID_MODE"
    assert str(info.value) == (
        f"invalid sandbox mode {bad!r} (accepted: read-only, workspace-write, danger-full-access)"
    )
    with pytest.raises(InvalidModeError):
        is_strictly_wider(bad, "read-only")  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["Ask", "always", "on-request", "", None, 0])
def test_a_bad_policy_names_the_accepted_values(bad: object) -> None:
    with pytest.raises(InvalidPolicyError) as info:
        parse_approval_policy(bad)
    assert info.value.code == "INVALID_POLICY"
    assert str(info.value) == f"invalid approval policy {bad!r} (accepted: ask, never)"


@pytest.mark.parametrize("bad", ["user", "", "Delegation", 1])
def test_a_bad_source_is_rejected(bad: object) -> None:
    with pytest.raises(InvalidSourceError) as info:
        parse_policy_source(bad)
    assert str(info.value) == f"invalid policy event source {bad!r} (accepted: delegation, parent)"


def test_as_outcome_returns_none_outside_the_vocabulary() -> None:
    assert as_outcome("allowed-once") is ApprovalOutcome.ALLOWED_ONCE
    assert as_outcome(ApprovalOutcome.CANCELLED) is ApprovalOutcome.CANCELLED
    for rogue in ("allow", "allowed_once", None, 1, {"outcome": "rejected"}):
        assert as_outcome(rogue) is None
