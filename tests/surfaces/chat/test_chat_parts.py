"""The run summary and the status line, from exact inputs."""

from __future__ import annotations

from io import StringIO
from typing import Any

from rich.console import Console

from tether._harness import SessionEvent
from tether.session import Event
from tether.surfaces.cli._summary import RunSummary, format_summary, summarize
from tether.surfaces.cli.chat._render import (
    EventRenderer,
    SessionDirectory,
    SessionInfo,
    args_summary,
    knob_change,
)
from tether.surfaces.cli.chat._status import ChildStatus, busy_line, children_text, idle_line

ROOT = "root-session"
CHILD = "child-session"
OTHER = "other-child"


def stream(*items: tuple[str, str, dict[str, Any], int]) -> list[SessionEvent]:
    seqs: dict[str, int] = {}
    out = []
    for session, kind, data, time in items:
        seq = seqs.get(session, 0)
        seqs[session] = seq + 1
        surface = "append" if kind in ("assistant/message", "tool/result", "user/message") else None
        out.append(SessionEvent(session, Event.make(kind, seq, time, data, surface_op=surface)))
    return out


def reply(tokens_in: int, tokens_out: int) -> dict[str, Any]:
    return {
        "content": "x",
        "finish_reason": "stop",
        "usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out},
    }


EVENTS = stream(
    (ROOT, "turn/start", {"turn": 1}, 1_000),
    (ROOT, "assistant/message", reply(100, 10), 1_100),
    (ROOT, "tool/call", {"call_id": "c1", "name": "write", "arguments": "{}"}, 1_200),
    (ROOT, "approval/asked", {"id": "a1", "tool_name": "write"}, 1_300),
    (ROOT, "approval/decided", {"id": "a1", "outcome": "allowed-once"}, 1_400),
    (ROOT, "tool/call", {"call_id": "c2", "name": "subagent", "arguments": "{}"}, 1_500),
    (CHILD, "sandbox/mode", {"mode": "workspace-write", "source": "delegation"}, 1_510),
    (CHILD, "approval/policy", {"policy": "never", "source": "delegation"}, 1_520),
    (CHILD, "turn/start", {"turn": 1}, 1_530),
    (CHILD, "assistant/message", reply(50, 5), 1_600),
    (CHILD, "tool/call", {"call_id": "c3", "name": "write", "arguments": "{}"}, 1_650),
    (CHILD, "approval/asked", {"id": "a2", "tool_name": "write"}, 1_700),
    (CHILD, "approval/decided", {"id": "a2", "outcome": "rejected"}, 1_800),
    (CHILD, "turn/end", {"turn": 1, "reason": "completed"}, 1_900),
    (OTHER, "turn/start", {"turn": 1}, 2_000),
    (OTHER, "subagent/descriptor", {"version": 2, "mode": "one-shot", "provider": "spawn"}, 2_010),
    (OTHER, "approval/asked", {"id": "a3", "tool_name": "bash"}, 2_020),
    (OTHER, "approval/decided", {"id": "a3", "outcome": "cancelled"}, 2_030),
    (OTHER, "turn/end", {"turn": 1, "reason": "aborted", "cause": "parent"}, 2_040),
    (ROOT, "sandbox/mode", {"mode": "read-only", "source": "delegation"}, 2_100),
    (ROOT, "assistant/message", reply(200, 20), 2_200),
    (ROOT, "turn/end", {"turn": 1, "reason": "completed"}, 3_500),
)


def test_summarize_counts_every_session_of_the_run() -> None:
    assert summarize(EVENTS) == RunSummary(
        turns=1,
        child_turns=2,
        tool_calls=3,
        approvals_asked=3,
        approvals_granted=1,
        approvals_denied=2,
        children=2,
        prompt_tokens=350,
        completion_tokens=35,
        elapsed_seconds=2.5,
    )


def test_summarize_takes_the_given_root_and_elapsed_time() -> None:
    summary = summarize(EVENTS[6:14], root_id=CHILD, elapsed=7.25)
    assert (summary.turns, summary.child_turns, summary.children) == (1, 0, 0)
    assert summary.elapsed_seconds == 7.25
    assert summary.tokens == 55


def test_summarize_of_nothing_is_zero() -> None:
    assert summarize([]) == RunSummary(0, 0, 0, 0, 0, 0, 0, 0, 0, 0.0)


def test_format_summary() -> None:
    assert format_summary(summarize(EVENTS)) == (
        "1 turn (+2 in children) · 3 tool calls · approvals: 3 asked, 1 granted, 2 denied · "
        "2 children spawned · 385 tokens (350 in, 35 out) · 2.5s"
    )
    quiet = RunSummary(2, 0, 1, 0, 0, 0, 1, 1_200, 34, 0.04)
    assert format_summary(quiet) == (
        "2 turns · 1 tool call · no approvals · 1 child spawned · 1,234 tokens (1,200 in, 34 out)"
        " · 0.0s"
    )


def test_to_dict_carries_the_total() -> None:
    assert RunSummary(1, 0, 0, 0, 0, 0, 0, 3, 4, 1.0).to_dict() == {
        "turns": 1,
        "child_turns": 0,
        "tool_calls": 0,
        "approvals_asked": 0,
        "approvals_granted": 0,
        "approvals_denied": 0,
        "children": 0,
        "prompt_tokens": 3,
        "completion_tokens": 4,
        "elapsed_seconds": 1.0,
        "tokens": 7,
    }


def test_status_lines() -> None:
    rows = [
        ChildStatus("b", "beta", "blocked", "bash"),
        ChildStatus("a", "alpha", "running", "ls"),
        ChildStatus("c", "gamma", "idle"),
    ]
    assert busy_line(3.25, "write", rows, queued=2) == (
        "⠹ 3.2s · running write · children: beta blocked on bash, alpha running (ls), gamma "
        "idle · 2 more approvals waiting · Ctrl-C cancels"
    )
    assert busy_line(0.0, None, []) == "⠋ 0.0s · working · Ctrl-C cancels"
    assert idle_line("1234567890", "workspace-write", []) == (
        "session 12345678 · preset workspace-write · /help · Ctrl-D quits"
    )
    many = [ChildStatus(str(i), f"c{i}", "running") for i in range(6)]
    assert children_text(many) == (
        "children: c0 running, c1 running, c2 running, c3 running, +2 more"
    )


def test_directory_labels_and_args_summary() -> None:
    directory = SessionDirectory(root_id=ROOT, sessions={CHILD: SessionInfo(2, ROOT, "alpha")})
    assert directory.label(CHILD) == "alpha"
    assert directory.label("0123456789abcdef") == "01234567"
    assert directory.depth(CHILD) == 2
    assert directory.depth(ROOT) == 0
    assert args_summary('{"path": "a.txt", "content": "line one\\nline two", "n": 3}') == (
        'path="a.txt" content="line one\\nline two" n=3'
    )
    long = "x" * 100
    assert args_summary('{"s": "' + long + '"}') == 's="' + "x" * 58 + "…"
    assert args_summary("not json") == "not json"


def test_streamed_text_stays_live_until_its_message_is_printed() -> None:
    buffer = StringIO()
    console = Console(file=buffer, width=200, color_system=None)
    directory = SessionDirectory(root_id=ROOT, sessions={CHILD: SessionInfo(1, ROOT, "alpha")})
    renderer = EventRenderer(console, directory)
    for piece in ("Hel", "lo", "Next"):
        renderer.on_delta(ROOT, piece)
    renderer.on_delta(CHILD, "child text")
    (message,) = stream((ROOT, "assistant/message", {**reply(1, 1), "content": "Hello"}, 1))
    renderer.render(message)
    assert renderer.live == {ROOT: "Next", CHILD: "child text"}
    (child_message,) = stream((CHILD, "assistant/message", {**reply(1, 1), "content": "other"}, 1))
    renderer.render(child_message)
    assert renderer.live == {ROOT: "Next"}
    assert buffer.getvalue() == "Hello\n│ [alpha] other\n"


def test_what_the_model_and_its_commands_wrote_is_rendered_inert() -> None:
    """F3: assistant text, results, diffs, labels and arguments keep no terminal control."""
    buffer = StringIO()
    console = Console(file=buffer, width=400, color_system=None)
    forged = "\x1b[2Kerased\rback\x9b2K\u202erev"
    shown = "\\x1b[2Kerased\\rback\\x9b2K\\u202erev"
    label = "alpha\x1b]0;title\x07"
    directory = SessionDirectory(root_id=ROOT, sessions={CHILD: SessionInfo(1, ROOT, label)})
    assert directory.label(CHILD) == "alpha\\x1b]0;title\\x07"
    renderer = EventRenderer(console, directory)
    items = stream(
        (ROOT, "assistant/message", {**reply(1, 1), "content": f"one\n{forged}\ttab"}, 1),
        (CHILD, "tool/call", {"call_id": "c1", "name": "bash", "arguments": '{"k\u202e": 1}'}, 2),
        (CHILD, "tool/result", {"call_id": "c1", "name": "bash", "content": f"{forged}\nb"}, 3),
        (ROOT, "turn/end", {"turn": 1, "reason": "error", "error": forged}, 4),
    )
    for item in items:
        renderer.render(item)
    prefix = "│ [alpha\\x1b]0;title\\x07] "
    assert [line.rstrip() for line in buffer.getvalue().splitlines()] == [
        "one",
        f"{shown}\ttab".expandtabs(8),
        prefix + "⚙ bash k\\u202e=1",
        prefix + f"  → {shown}",
        " " * len(prefix) + "b",  # a result's next line, under the prefix
        f"■ turn 1 error ({shown})",
    ]
    assert all(c.isprintable() for c in buffer.getvalue().replace("\n", ""))


def test_compaction_is_shown_when_the_agent_does_it_or_fails_to() -> None:
    buffer = StringIO()
    console = Console(file=buffer, width=200, color_system=None)
    renderer = EventRenderer(console, SessionDirectory(root_id=ROOT, sessions={}))
    compacted = {"first_seq": 4, "last_seq": 17, "tokens_before": 900, "tokens_after": 300}
    items = stream(
        (ROOT, "context/compacted", {"trigger": "auto", **compacted}, 1),
        (ROOT, "context/compacted", {"trigger": "manual", **compacted}, 2),
        (ROOT, "context/compact-failed", {"trigger": "auto", "error": "empty\x1b[2K"}, 3),
    )
    for item in items:
        renderer.render(item)
    assert buffer.getvalue().splitlines() == [
        "context compacted: events 4-17 summarised (about 900 → 300 tokens)",
        "context compaction failed: empty\\x1b[2K",
    ]


def test_permission_changes_and_decisions_are_shown_from_their_payloads() -> None:
    buffer = StringIO()
    console = Console(file=buffer, width=200, color_system=None)
    renderer = EventRenderer(console, SessionDirectory(root_id=ROOT, sessions={}))
    items = stream(
        (ROOT, "sandbox/mode", {"mode": "workspace-write", "source": "delegation"}, 1),
        (ROOT, "approval/policy", {"policy": "never"}, 2),
        (ROOT, "permission/preset", {"preset": "danger-full-access"}, 3),
        (ROOT, "approval/decided", {"id": "a1", "outcome": "allowed-once", "answered_by": "ci"}, 4),
        (ROOT, "approval/decided", {"id": "a2", "outcome": "rejected"}, 5),
        (
            ROOT,
            "approval/decided",
            {"id": "a3", "outcome": "allowed-once", "answered_by": "tether chat (ann)"},
            6,
        ),
    )
    for item in items:
        renderer.render(item)
    assert buffer.getvalue().splitlines() == [
        "sandbox: workspace-write (delegation)",
        "approval: never",
        "permission preset: danger-full-access",
        "approval allowed-once by ci",
        "approval rejected",
    ]
    assert knob_change("approval/policy", {"policy": "ask", "source": "parent"}) == (
        "approval",
        "ask",
        "parent",
    )
