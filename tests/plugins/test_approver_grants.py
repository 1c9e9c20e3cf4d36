"""The answerer protocol's grants: what ``--approver`` reads (the asking child's label, the
outcomes and scopes it may choose) and may print; the ACP option mapping; the terminal's
``s``/``w`` choices (``plugins/_approver_command.py``, ``policy/_acp_options.py``,
``surfaces/cli/_grant_choice.py``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import pytest

from tether.plugins._approver_command import parse_answer, request_payload
from tether.policy._acp_options import (
    KIND_OF_OUTCOME,
    OUTCOME_OF_KIND,
    acp_options,
    answer_of_option,
)
from tether.policy._approval import Answer, ApprovalRequest, GrantChoices, RoutedOrigin
from tether.policy._events import AnswererFailure, GrantScope
from tether.policy._modes import ApprovalOutcome, SandboxMode
from tether.session import Session, SessionHeader
from tether.subagents._events import Descriptor
from tether.surfaces.cli._grant_choice import grant_answer, grant_labels, grant_lines


@dataclass(eq=False)
class ToyAgent:
    session: Session


SCOPES = (
    GrantScope("exact", "Bash(npm test --watch)"),
    GrantScope("prefix", "Bash(npm test:*)"),
    GrantScope("prefix", "Bash(npm:*)"),
    GrantScope("tool", "Bash"),
)
CHOICES = GrantChoices(SCOPES, always=True)


@pytest.mark.parametrize(
    ("printed", "answer"),
    [
        ("allowed-once", "allowed-once"),
        ("allowed-for-session\n", "allowed-for-session"),
        ("allowed-always", "allowed-always"),
        ('{"outcome": "rejected"}', "rejected"),
        ('{"outcome": "allowed-for-session"}', "allowed-for-session"),
        (
            '{"outcome": "allowed-for-session", "scope": {"kind": "prefix"}}',
            Answer("allowed-for-session", scope="prefix"),
        ),
        (
            '{"outcome": "allowed-always", "scope": {"kind": "prefix", "rule": "Bash(npm:*)"}}',
            Answer("allowed-always", scope=GrantScope("prefix", "Bash(npm:*)")),
        ),
        (
            '{"outcome": "allowed-always", "scope": {"kind": "tool", "rule": "Bash", '
            '"target_mode": "workspace-write"}}',
            Answer("allowed-always", scope=GrantScope("tool", "Bash", SandboxMode.WORKSPACE_WRITE)),
        ),
    ],
)
def test_what_an_approver_may_print(printed: str, answer: object) -> None:
    assert parse_answer(printed.encode()) == answer


@pytest.mark.parametrize(
    ("printed", "kind"),
    [
        ("allow_once", "invalid-output"),  # ACP's words are for an ACP surface, not here
        ('{"outcome": "allow_always"}', "unknown-outcome"),
        ('{"outcome": "allowed-once", "scope": {"kind": "tool"}}', "invalid-output"),
        ('{"outcome": "rejected", "scope": {"kind": "tool"}}', "invalid-output"),
        ('{"outcome": "allowed-for-session", "scope": "prefix"}', "invalid-output"),
        ('{"outcome": "allowed-for-session", "scope": {"kind": "everything"}}', "invalid-output"),
        ('{"outcome": "allowed-for-session", "scope": {"kind": "tool", "x": 1}}', "invalid-output"),
        (
            '{"outcome": "allowed-for-session", "scope": {"kind": "tool", "target_mode": "x"}}',
            "invalid-output",
        ),
        (
            '{"outcome": "allowed-for-session", "scope": {"kind": "tool", "rule": 3}}',
            "invalid-output",
        ),
        ('["allowed-once"]', "invalid-output"),
    ],
)
def test_anything_else_is_a_failure(printed: str, kind: str) -> None:
    failure = parse_answer(printed.encode())
    assert isinstance(failure, AnswererFailure) and failure.kind == kind


def session(sid: str, *, depth: int = 0, label: str | None = None) -> Session:
    s = Session(SessionHeader(sid, 0, cwd="/ws", delegation_depth=depth))
    if label is not None:
        descriptor = Descriptor("one-shot", "spawn", label, None, None)
        s.append(descriptor.TYPE, descriptor.to_data())
    s.append("approval/asked", {"id": f"ask-{sid}", "tool_name": "bash"})
    return s


def test_the_request_names_the_asking_child_and_what_may_be_chosen() -> None:
    root = ToyAgent(session("root"))
    child = ToyAgent(session("child", depth=1, label="builder"))
    origin = RoutedOrigin(child, "c1", "bash", "npm test --watch", ("child", "root"))
    request = ApprovalRequest(
        root,
        "bash",
        call_id="c1",
        action={"tool": "bash", "command": "npm test --watch"},
        origin=origin,
        choices=CHOICES,
    )
    payload = request_payload(request)
    assert json.loads(json.dumps(payload)) == {
        "approval_id": "ask-child",
        "session_id": "child",
        "delegation_depth": 1,
        "label": "builder",
        "tool_name": "bash",
        "call_id": "c1",
        "reason": None,
        "action": {"tool": "bash", "command": "npm test --watch"},
        "outcomes": ["allowed-once", "allowed-for-session", "allowed-always", "rejected"],
        "scopes": [scope.to_data() for scope in SCOPES],
        "origin": {
            "child_session_id": "child",
            "call_id": "c1",
            "tool_name": "bash",
            "arguments_summary": "npm test --watch",
            "lineage": ["child", "root"],
            "decided_by": "root",
        },
    }
    plain = request_payload(replace(request, origin=None, choices=None))
    assert (plain["label"], plain["outcomes"], plain["scopes"]) == (
        None,
        ["allowed-once", "rejected"],
        [],
    )
    no_always = request_payload(replace(request, choices=GrantChoices(SCOPES, always=False)))
    assert no_always["outcomes"] == ["allowed-once", "allowed-for-session", "rejected"]


# -- ACP ----------------------------------------------------------------------------------------
def test_the_acp_kinds_map_onto_tethers_outcomes_both_ways() -> None:
    assert dict(OUTCOME_OF_KIND) == {
        "allow_once": ApprovalOutcome.ALLOWED_ONCE,
        "allow_always": ApprovalOutcome.ALLOWED_FOR_SESSION,
        "reject_once": ApprovalOutcome.REJECTED,
        "reject_always": ApprovalOutcome.REJECTED,
    }
    # every outcome an answerer gives has an option kind, and reads back as an allow or a reject
    for outcome, kind in KIND_OF_OUTCOME.items():
        assert (OUTCOME_OF_KIND[kind] is ApprovalOutcome.REJECTED) is (
            outcome is ApprovalOutcome.REJECTED
        )


def test_acp_options_lay_out_a_question_and_read_the_selection_back() -> None:
    options = acp_options(GrantChoices(SCOPES[:2], always=True))
    assert [o.to_acp() for o in options] == [
        {"optionId": "allowed-once", "name": "Allow once", "kind": "allow_once"},
        {
            "optionId": "allowed-for-session:1",
            "name": "Allow Bash(npm test --watch) for this session",
            "kind": "allow_always",
        },
        {
            "optionId": "allowed-for-session:2",
            "name": "Allow Bash(npm test:*) for this session",
            "kind": "allow_always",
        },
        {
            "optionId": "allowed-always:1",
            "name": "Always allow Bash(npm test --watch) in this workspace",
            "kind": "allow_always",
        },
        {
            "optionId": "allowed-always:2",
            "name": "Always allow Bash(npm test:*) in this workspace",
            "kind": "allow_always",
        },
        {"optionId": "rejected", "name": "Reject", "kind": "reject_once"},
    ]
    assert answer_of_option(options, "allowed-for-session:2", "zed") == Answer(
        "allowed-for-session", "zed", SCOPES[1]
    )
    assert answer_of_option(options, "rejected") == Answer("rejected")
    assert answer_of_option(options, ApprovalOutcome.CANCELLED) == Answer("cancelled")
    assert answer_of_option(options, "allowed-always:9") is None
    assert [o.option_id for o in acp_options(None)] == ["allowed-once", "rejected"]
    no_always = acp_options(GrantChoices(SCOPES[:1], always=False))
    assert [o.option_id for o in no_always] == ["allowed-once", "allowed-for-session:1", "rejected"]


# -- the terminal's choices ----------------------------------------------------------------------
def test_the_terminal_offers_and_reads_grants() -> None:
    request = ApprovalRequest(ToyAgent(session("r")), "bash", choices=CHOICES)
    assert grant_lines(request) == [
        "  grant scopes (s or w takes the first; s2, w3 … a wider one):",
        "    1. Bash(npm test --watch)",
        "    2. Bash(npm test:*)",
        "    3. Bash(npm:*)",
        "    4. Bash",
    ]
    assert grant_labels(request) == [
        "[s] Allow for this session",
        "[w] Always allow in this workspace",
    ]
    assert grant_answer("s", request) == Answer("allowed-for-session", None, SCOPES[0])
    assert grant_answer(" S3 ", request, "me") == Answer("allowed-for-session", "me", SCOPES[2])
    assert grant_answer("always", request) == Answer("allowed-always", None, SCOPES[0])
    assert grant_answer("w4", request) == Answer("allowed-always", None, SCOPES[3])
    for word in ("w5", "s0", "session2", "x", "", "a"):
        assert grant_answer(word, request) is None, word
    plain = ApprovalRequest(ToyAgent(session("r")), "bash")
    assert (
        grant_lines(plain) == [] and grant_labels(plain) == [] and grant_answer("s", plain) is None
    )
    session_only = replace(request, choices=GrantChoices(SCOPES, always=False))
    assert grant_labels(session_only) == ["[s] Allow for this session"]
    assert grant_answer("w", session_only) is None
