"""The answerer protocol's grants: what ``--approver`` reads (the asking child's label, the
outcomes and scopes it may choose) and may print; the ACP option mapping; the terminal's
keys, ``s``/``w`` then a scope's number (``plugins/_approver_command.py``,
``policy/_acp_options.py``, ``surfaces/cli/_grant_choice.py``)."""

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
from tether.surfaces.cli._approval_prompt import CHOICES as CHOICES_ROWS
from tether.surfaces.cli._grant_choice import AnswerKeys, Chosen, grant_lines


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
def keyed(request: ApprovalRequest, keys: list[str]) -> tuple[Chosen | None, str]:
    """What ``keys`` answer, and what the question asks for after the last one."""
    reading = AnswerKeys(request)
    chosen = None
    for key in keys:
        assert chosen is None, "a key after the answer"
        chosen = reading.press(key)
    return chosen, reading.prompt()


def test_the_terminal_offers_grants_and_reads_a_key_then_the_scopes_number() -> None:
    request = ApprovalRequest(ToyAgent(session("r")), "bash", choices=CHOICES)
    assert grant_lines(request) == [
        "  grant scopes (s or w, then the scope's number):",
        "    1. Bash(npm test --watch)",
        "    2. Bash(npm test:*)",
        "    3. Bash(npm:*)",
        "    4. Bash",
    ]
    everything = (
        "[a] Allow once   [s] Allow for this session   [w] Always allow in this workspace   "
        "[r] Reject (default)"
    )
    assert keyed(request, []) == (None, everything)
    assert keyed(request, ["s"]) == (
        None,
        "Allow for this session: scope 1-4 (Enter: 1, Esc: back)",
    )
    session_, always = CHOICES_ROWS[1], CHOICES_ROWS[2]
    assert keyed(request, ["s", "\r"])[0] == Chosen(session_, SCOPES[0], "1")
    assert keyed(request, ["S", "3"])[0] == Chosen(session_, SCOPES[2], "3")
    assert keyed(request, ["w", "4"])[0] == Chosen(always, SCOPES[3], "4")
    # while a scope is picked, only a number, Enter or Escape does anything
    for ignored in ("0", "5", "a", "r", "s", "²", "x"):
        assert keyed(request, ["w", ignored]) == (
            None,
            "Always allow in this workspace: scope 1-4 (Enter: 1, Esc: back)",
        ), ignored
    assert keyed(request, ["s", "\x1b"]) == (None, everything)
    assert keyed(request, ["s", "\x1b", "r"])[0] == Chosen(CHOICES_ROWS[3], None, "r")
    assert keyed(request, ["1", "x"]) == (None, everything)  # a number alone answers nothing
    answer = Chosen(always, SCOPES[1], "2")
    assert answer.answer("me") == Answer("allowed-always", "me", SCOPES[1])
    assert answer.said() == "allowed-always: Bash(npm test:*)"


def test_a_question_with_one_scope_grants_it_with_one_key_and_one_without_grants_offers_none() -> (
    None
):
    one = ApprovalRequest(
        ToyAgent(session("r")), "mcp__x__y", choices=GrantChoices((SCOPES[3],), always=False)
    )
    assert grant_lines(one) == ["  grant scope (s):", "    Bash"]
    assert keyed(one, ["s"])[0] == Chosen(CHOICES_ROWS[1], SCOPES[3], "s")
    assert keyed(one, ["w"]) == (
        None,
        "[a] Allow once   [s] Allow for this session   [r] Reject (default)",
    )
    plain = ApprovalRequest(ToyAgent(session("r")), "bash")
    assert grant_lines(plain) == []
    assert keyed(plain, ["s", "w", "1"]) == (None, "[a] Allow once   [r] Reject (default)")
    assert keyed(plain, ["A"])[0] == Chosen(CHOICES_ROWS[0], None, "a")
