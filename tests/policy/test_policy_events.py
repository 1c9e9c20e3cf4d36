"""The policy layer's event payloads (``policy/_events.py``): each definition reads back what
it writes, key for key and in the stored order, and refuses a stored payload that does not
fit with its vocabulary's own error code."""

from __future__ import annotations

import json

import pytest

from tether.errors import TetherError
from tether.policy import ApprovalOutcome, ApprovalPolicy, SandboxMode
from tether.policy._approval import fold_approval_policy
from tether.policy._events import (
    ApprovalAnswerRefused,
    ApprovalAsked,
    ApprovalDecided,
    ApprovalPendingClosed,
    ApprovalPendingOpened,
    ApprovalPolicySet,
    PermissionPresetSet,
    SandboxModeSet,
    read_approval_pending,
)
from tether.policy._presets import derive_preset
from tether.policy._sandbox_policy import fold_sandbox_mode
from tether.session import Event, JsonObject
from tether.session._answer_channel import RefusedAnswer
from tether.session.persistence._repair import plan_repair

Definition = (
    SandboxModeSet
    | ApprovalPolicySet
    | PermissionPresetSet
    | ApprovalAsked
    | ApprovalDecided
    | ApprovalPendingOpened
    | ApprovalPendingClosed
    | ApprovalAnswerRefused
)

ROUND_TRIPS: list[tuple[Definition, JsonObject]] = [
    (SandboxModeSet(SandboxMode.READ_ONLY), {"mode": "read-only"}),
    (
        SandboxModeSet(SandboxMode.WORKSPACE_WRITE, "delegation"),
        {"mode": "workspace-write", "source": "delegation"},
    ),
    (ApprovalPolicySet(ApprovalPolicy.ASK), {"policy": "ask"}),
    (ApprovalPolicySet(ApprovalPolicy.NEVER, "parent"), {"policy": "never", "source": "parent"}),
    (PermissionPresetSet("workspace-write"), {"preset": "workspace-write"}),
    (ApprovalAsked("ap-1", "read"), {"id": "ap-1", "tool_name": "read"}),
    (
        ApprovalAsked("ap-2", "bash", "c1", "why", "root-id", {"command": "ls"}),
        {
            "id": "ap-2",
            "tool_name": "bash",
            "call_id": "c1",
            "reason": "why",
            "routed_to": "root-id",
            "action": {"command": "ls"},
        },
    ),
    (
        ApprovalAsked("ap-3", "write", reason="r"),
        {"id": "ap-3", "tool_name": "write", "reason": "r"},
    ),
    (ApprovalDecided("ap-1", ApprovalOutcome.REJECTED), {"id": "ap-1", "outcome": "rejected"}),
    (
        ApprovalDecided("ap-1", ApprovalOutcome.ALLOWED_ONCE, "alice"),
        {"id": "ap-1", "outcome": "allowed-once", "answered_by": "alice"},
    ),
    (
        ApprovalDecided("ap-9", ApprovalOutcome.UNAVAILABLE, repaired=True),
        {"id": "ap-9", "outcome": "unavailable", "repaired": True},
    ),
    (
        ApprovalPendingOpened("ap-4", "child", "bash", "", ("child", "root")),
        {
            "id": "ap-4",
            "state": "pending",
            "child_session": "child",
            "tool_name": "bash",
            "reason": "",
            "lineage": ["child", "root"],
        },
    ),
    (
        ApprovalPendingOpened("ap-5", "child", "bash", "why", ("child", "root"), "c3"),
        {
            "id": "ap-5",
            "state": "pending",
            "child_session": "child",
            "tool_name": "bash",
            "call_id": "c3",
            "reason": "why",
            "lineage": ["child", "root"],
        },
    ),
    (
        ApprovalPendingClosed("ap-5", ApprovalOutcome.CANCELLED),
        {"id": "ap-5", "state": "decided", "outcome": "cancelled"},
    ),
    (
        ApprovalAnswerRefused("ap-6", RefusedAnswer("socket", "other-user", "uid 1001", pid=42)),
        {"id": "ap-6", "via": "socket", "reason": "other-user", "detail": "uid 1001", "pid": 42},
    ),
    (
        ApprovalAnswerRefused(
            "ap-6",
            RefusedAnswer(
                "answer-box", "no-proof", "a file", file="ap-6.json", claimed_outcome="rejected"
            ),
        ),
        {
            "id": "ap-6",
            "via": "answer-box",
            "reason": "no-proof",
            "detail": "a file",
            "file": "ap-6.json",
            "claimed_outcome": "rejected",
        },
    ),
]


@pytest.mark.parametrize(("definition", "data"), ROUND_TRIPS)
def test_a_definition_writes_the_stored_layout_and_reads_it_back(
    definition: Definition, data: JsonObject
) -> None:
    written = definition.to_data()
    # Same keys in the same order: the JSON text of a log must not change.
    assert json.dumps(written) == json.dumps(data)
    assert type(definition).from_data(data) == definition
    stored = Event.make(definition.TYPE, 0, 0, written)
    assert type(definition).from_data(stored.data) == definition


REFUSALS: list[tuple[type[Definition], JsonObject, str]] = [
    (SandboxModeSet, {}, "INVALID_MODE"),
    (SandboxModeSet, {"mode": "root"}, "INVALID_MODE"),
    (SandboxModeSet, {"mode": "read-only", "source": "user"}, "INVALID_POLICY_SOURCE"),
    (ApprovalPolicySet, {"policy": "always"}, "INVALID_POLICY"),
    (ApprovalPolicySet, {"policy": "ask", "source": 3}, "INVALID_POLICY_SOURCE"),
    (PermissionPresetSet, {"preset": 7}, "INVALID_POLICY_EVENT"),
    (PermissionPresetSet, {}, "INVALID_POLICY_EVENT"),
    (ApprovalAsked, {"tool_name": "read"}, "INVALID_POLICY_EVENT"),
    (ApprovalAsked, {"id": "a", "tool_name": None}, "INVALID_POLICY_EVENT"),
    (ApprovalAsked, {"id": "a", "tool_name": "t", "call_id": 1}, "INVALID_POLICY_EVENT"),
    (ApprovalAsked, {"id": "a", "tool_name": "t", "action": "ls"}, "INVALID_POLICY_EVENT"),
    (ApprovalDecided, {"id": "a", "outcome": "maybe"}, "INVALID_POLICY_EVENT"),
    (ApprovalDecided, {"id": 1, "outcome": "rejected"}, "INVALID_POLICY_EVENT"),
    (
        ApprovalDecided,
        {"id": "a", "outcome": "rejected", "answered_by": []},
        "INVALID_POLICY_EVENT",
    ),
    (
        ApprovalDecided,
        {"id": "a", "outcome": "rejected", "repaired": "yes"},
        "INVALID_POLICY_EVENT",
    ),
    (
        ApprovalPendingOpened,
        {"id": "a", "child_session": "c", "tool_name": "t", "reason": "", "lineage": "c"},
        "INVALID_POLICY_EVENT",
    ),
    (
        ApprovalPendingOpened,
        {"id": "a", "child_session": "c", "tool_name": "t", "lineage": ["c"]},
        "INVALID_POLICY_EVENT",
    ),
    (ApprovalPendingClosed, {"id": "a", "outcome": None}, "INVALID_POLICY_EVENT"),
    (
        ApprovalAnswerRefused,
        {"id": "a", "via": "mail", "reason": "malformed", "detail": "d"},
        "INVALID_POLICY_EVENT",
    ),
    (
        ApprovalAnswerRefused,
        {"id": "a", "via": "socket", "reason": "forged", "detail": "d"},
        "INVALID_POLICY_EVENT",
    ),
    (
        ApprovalAnswerRefused,
        {"id": "a", "via": "socket", "reason": "confined", "detail": "d", "pid": True},
        "INVALID_POLICY_EVENT",
    ),
    (
        ApprovalAnswerRefused,
        {"id": "a", "via": "socket", "reason": "confined"},
        "INVALID_POLICY_EVENT",
    ),
]


@pytest.mark.parametrize(("definition", "data", "code"), REFUSALS)
def test_a_payload_that_does_not_fit_is_refused_with_its_code(
    definition: type[Definition], data: JsonObject, code: str
) -> None:
    with pytest.raises(TetherError) as info:
        definition.from_data(data)
    assert info.value.code == code
    if code == "INVALID_POLICY_EVENT":
        assert definition.TYPE in str(info.value)


def test_an_approval_pending_record_is_read_by_its_state() -> None:
    opened = ApprovalPendingOpened("ap-1", "child", "read", "r", ("child", "root"))
    closed = ApprovalPendingClosed("ap-1", ApprovalOutcome.ALLOWED_ONCE)
    assert read_approval_pending(opened.to_data()) == opened
    assert read_approval_pending(closed.to_data()) == closed
    with pytest.raises(TetherError) as info:
        read_approval_pending({"id": "ap-1", "state": "waiting"})
    assert info.value.code == "INVALID_POLICY_EVENT"


def test_the_folds_name_the_event_that_does_not_fit() -> None:
    bad_mode = [Event.make("sandbox/mode", 4, 0, {"mode": "root"})]
    with pytest.raises(TetherError, match=r"sandbox/mode event #4") as mode_info:
        fold_sandbox_mode(bad_mode)
    assert mode_info.value.code == "INVALID_MODE"
    bad_policy = [Event.make("approval/policy", 2, 0, {"policy": "always"})]
    with pytest.raises(TetherError, match=r"approval/policy event #2") as policy_info:
        fold_approval_policy(bad_policy)
    assert policy_info.value.code == "INVALID_POLICY"
    # A source no write path produces is refused too: the fold reads the whole payload.
    bad_source = [Event.make("sandbox/mode", 5, 0, {"mode": "read-only", "source": "user"})]
    with pytest.raises(TetherError, match=r"sandbox/mode event #5") as source_info:
        fold_sandbox_mode(bad_source)
    assert source_info.value.code == "INVALID_POLICY_SOURCE"


def test_a_preset_label_that_does_not_fit_is_no_label() -> None:
    # The knobs are the truth; a corrupt label is ignored and the preset derived from them.
    events = [
        Event.make("sandbox/mode", 0, 0, {"mode": "workspace-write"}),
        Event.make("approval/policy", 1, 0, {"policy": "ask"}),
        Event.make("permission/preset", 2, 0, {"preset": 7}),
    ]
    assert derive_preset(events) == "workspace-write"


def test_the_crash_repairs_closing_decision_fits_the_definition() -> None:
    # The session layer spells this payload itself (it sits below policy); it must stay a
    # payload the definition reads.
    asked = ApprovalAsked("ap-7", "bash", "c1")
    events = [
        Event.make("turn/start", 0, 0, {"turn": 1}),
        Event.make(asked.TYPE, 1, 0, asked.to_data()),
    ]
    closers, _ = plan_repair(events)
    decided = [ApprovalDecided.from_data(e.data) for e in closers if e.type == ApprovalDecided.TYPE]
    assert decided == [ApprovalDecided("ap-7", ApprovalOutcome.UNAVAILABLE, repaired=True)]
