"""Approvals answered at the chat keyboard, rendering of a turn, and routed questions."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from chat_support import call, open_chat, root_steps, stored_events

from tether.surfaces.cli.chat._prompts import chat_answerer

WRITE_THEN_FINISH = [
    root_steps(
        {"text": "Writing it.", "tool_calls": [call("write", path="t.txt", content="t")]},
        {"text": "finished"},
    )
]


GRANT_LINES = [
    "  grant scopes (s or w, then the scope's number):",
    "    1. Write(./t.txt)",
    "    2. Write(./**)",
    "    3. Write",
]
CHOICES_LINE = (
    "  [a] Allow once   [s] Allow for this session   [w] Always allow in this workspace   "
    "[r] Reject (default) > "
)
WROTE = "  → Wrote 1 byte to t.txt"


REJECTED = '  → Error: the user rejected tool "write"'
ANSWERS = "allow|allow-session|allow-always|reject"


@pytest.mark.parametrize(
    ("keys", "outcome", "shown", "result", "kind", "rule"),
    [
        ("a", "allowed-once", "  ✔ allowed once", WROTE, None, None),
        ("s1", "allowed-for-session", "  ✔ allowed for this session: Write(./t.txt)", WROTE,
         "exact", "Write(./t.txt)"),
        ("S2", "allowed-for-session", "  ✔ allowed for this session: Write(./**)", WROTE,
         "path", "Write(./**)"),
        ("w\r", "allowed-always", "  ✔ always allowed in this workspace: Write(./t.txt)", WROTE,
         "exact", "Write(./t.txt)"),
        ("w93", "allowed-always", "  ✔ always allowed in this workspace: Write", WROTE,
         "tool", "Write"),
        ("r", "rejected", "  ✘ rejected", REJECTED, None, None),
        ("\r", "rejected", "  ✘ rejected", REJECTED, None, None),
        ("1s\x1br", "rejected", "  ✘ rejected", REJECTED, None, None),
    ],
)  # fmt: skip
async def test_the_keys_decide_the_write_and_the_audit_pair_is_stored(
    tmp_path: Path,
    keys: str,
    outcome: str,
    shown: str,
    result: str,
    kind: str | None,
    rule: str | None,
) -> None:
    async with open_chat(tmp_path, WRITE_THEN_FINISH) as chat:
        root = chat.app.root.id
        chat.type("go\r")
        question = await chat.wait_for("Reject (default) > ")
        for key in keys:  # one at a time, as typed
            chat.type(key)
            await asyncio.sleep(0)
        rest = await chat.turn_end()
        events = await stored_events(chat.harness, root)
        await chat.quit()
    audit = [(t, d) for t, d in events if t in ("approval/asked", "approval/decided")]
    assert len(audit) == 2
    (asked_type, asked), (decided_type, decided) = audit
    assert question.splitlines() == [
        "Writing it.",
        '⚙ write path="t.txt" content="t"',
        'Approval needed: tool "write"',
        "  sandbox: workspace-write (the session's mode, unchanged)",
        f"  asked by: this session {root[:8]} (depth 0)",
        f"  from another terminal: tether approvals answer {asked['id'][:8]} {ANSWERS} "
        f"--store sqlite:///{tmp_path / 'tether.db'}",
        "  written by the agent (escaped, in full):",
        '  reason: run "write": t.txt',
        "  path: t.txt",
        *GRANT_LINES,
        CHOICES_LINE,
    ]
    assert rest.splitlines()[1:4] == [shown, result, "finished"]
    assert (chat.workspace / "t.txt").exists() is (result == WROTE)
    assert asked_type == "approval/asked"
    assert asked == {
        "id": asked["id"],
        "tool_name": "write",
        "call_id": f"call_{root[:8]}_0_0",
        "reason": 'run "write": t.txt',
        "action": {"tool": "write", "path": "t.txt"},
    }
    assert decided_type == "approval/decided"
    granted = {"scope": {"kind": kind, "rule": rule}} if rule else {}
    assert decided == {
        "id": asked["id"],
        "outcome": outcome,
        "answered_by": chat_answerer(),
        **granted,
    }
    grants = [d for t, d in events if t == "approval/grant"]
    assert [(g["outcome"], g["scope"]["rule"]) for g in grants] == (
        [(outcome, rule)] if granted else []
    )


async def test_a_grants_scope_is_asked_for_in_the_status_line(tmp_path: Path) -> None:
    async with open_chat(tmp_path, WRITE_THEN_FINISH) as chat:
        chat.type("go\r")
        await chat.wait_for("Reject (default) > ")

        async def status_after(key: str) -> str:
            chat.type(key)
            for _ in range(2000):
                shown = "".join(text for _style, text, *_ in chat.app._busy_text())
                if f"approval for write: {expected[key]} " in shown:
                    return shown
                await asyncio.sleep(0.01)
            raise AssertionError(f"the status line never asked for {expected[key]!r}: {shown}")

        expected = {
            "w": "Always allow in this workspace: scope 1-3 (Enter: 1, Esc: back)",
            "\x1b": CHOICES_LINE.strip().removesuffix(" >"),
        }
        await status_after("w")
        await status_after("\x1b")  # back to the choices
        chat.type("w2")
        rest = await chat.turn_end()
        await chat.quit()
    # the transcript shows the answer only: picking the scope printed nothing
    assert rest.splitlines()[1] == "  ✔ always allowed in this workspace: Write(./**)"
    assert (chat.workspace / "t.txt").read_text() == "t"


async def test_keys_typed_before_the_question_answer_nothing(tmp_path: Path) -> None:
    async with open_chat(tmp_path, WRITE_THEN_FINISH) as chat:
        chat.type("go\raaaa")  # typed ahead: must not approve an unseen question
        await chat.wait_for("Reject (default) > ")
        assert chat.app.approvals.current is not None
        chat.type("r")
        await chat.wait_for("  ✘ rejected")
        await chat.turn_end()
        await chat.quit()
    assert not (chat.workspace / "t.txt").exists()


async def test_a_turn_is_rendered_with_results_errors_diffs_and_a_summary(tmp_path: Path) -> None:
    agents = [
        root_steps(
            {
                "text": "Editing, then two failures.",
                "tool_calls": [
                    call("edit", path="notes.txt", old_string="world", new_string="there"),
                    call("write", path="../outside.txt", content="x"),
                    call("read", path="missing.txt"),
                ],
            },
            {"text": "All reported."},
        )
    ]
    async with open_chat(tmp_path, agents, plugins=()) as chat:
        (chat.workspace / "notes.txt").write_text("hello\nworld\n")
        text = await chat.turn("go")
        await chat.quit()
    lines = text.splitlines()
    ws = chat.workspace
    assert lines[:9] == [
        "Editing, then two failures.",
        '⚙ edit path="notes.txt" old_string="world" new_string="there"',
        "  → Edited notes.txt: 1 replacement",
        "@@ -1,2 +1,2 @@",
        " hello",
        "-world",
        "+there",
        '⚙ write path="../outside.txt" content="x"',
        f"  → Error: cannot write ../outside.txt: it is outside the workspace {ws} (it resolves "
        f"to {tmp_path / 'outside.txt'}) [sandbox: file access denied under workspace-write mode]",
    ]
    # Further lines of the denial (the escalation hint, when one applies) follow it.
    read = lines.index('⚙ read path="missing.txt"')
    assert lines[read + 1].startswith("  → Error: ")
    assert lines[read + 2] == "All reported."
    assert lines[read + 3].startswith("── 1 turn · 3 tool calls · no approvals · no children · ")
    assert (ws / "notes.txt").read_text() == "hello\nthere\n"
    assert not (tmp_path / "outside.txt").exists()


async def test_a_childs_routed_question_shows_its_lineage(tmp_path: Path) -> None:
    agents = [
        root_steps(
            {"tool_calls": [call("subagent", description="alpha", prompt="Write a.txt.")]},
            {"text": "Started alpha.", "expect": "started subagent"},
            {"text": "alpha is done.", "expect": "Background subagent"},
        ),
        {
            "match": {"depth": 1, "label": "alpha"},
            "steps": [
                {"tool_calls": [call("write", path="a.txt", content="from alpha")]},
                {"text": "alpha wrote a.txt", "expect": "Wrote"},
            ],
        },
    ]
    async with open_chat(tmp_path, agents, plugins=("root_approvals",)) as chat:
        root = chat.app.root.id
        chat.type("delegate\r")
        shown = await chat.wait_for("Reject (default) > ")
        child = next(a for a in chat.harness.agents if a.depth == 1).id
        chat.type("a")
        rest = await chat.turn_end()
        child_events = await stored_events(chat.harness, child)
        await chat.quit()
    asked = next(d for t, d in child_events if t == "approval/asked")
    assert (
        f"  asked by: subagent [alpha] {child[:8]} (depth 1), routed to the root\n"
        f"  lineage: [alpha] {child[:8]} → root {root[:8]}\n"
        f"  from another terminal: tether approvals answer {asked['id'][:8]} {ANSWERS} "
        f"--store sqlite:///{tmp_path / 'tether.db'}\n"
        "  written by the agent (escaped, in full):\n"
        '  reason: Subagent approval: run "write" · Arguments: {"content": "from alpha"} · '
        "Path: a.txt\n"
        "  path: a.txt\n"
        "  grant scopes (s or w, then the scope's number):\n"
        "    1. Write(./a.txt)\n"
        "    2. Write(./**)\n"
        "    3. Write\n" + CHOICES_LINE
    ) in shown
    assert 'Approval needed: tool "write"\n  sandbox: workspace-write (the session' in shown
    assert "│ [alpha] task: Write a.txt." in shown
    assert "│ [alpha] sandbox: workspace-write (delegation)" in shown
    assert "│ [alpha] approval: never (delegation)" in shown
    assert "│ [alpha]   → Wrote 10 bytes to a.txt" in rest
    assert "│ [alpha] alpha wrote a.txt" in rest
    assert "│ [alpha] ✓ turn 1 completed" in rest
    assert f"◂ Background subagent {child} finished" in rest
    assert "· 1 child spawned ·" in rest
    assert (
        "2 turns (+1 in children) · 2 tool calls · approvals: 1 asked, 1 granted, 0 denied" in rest
    )
    assert (chat.workspace / "a.txt").read_text() == "from alpha"
    decided = [d for t, d in child_events if t == "approval/decided"]
    assert decided == [
        {"id": decided[0]["id"], "outcome": "allowed-once", "answered_by": chat_answerer()}
    ]


async def test_ask_user_is_answered_with_a_typed_line(tmp_path: Path) -> None:
    agents = [
        root_steps(
            {"tool_calls": [call("ask_user", question="Which  colour?")]},
            {"text": "Blue it is.", "expect": "^blue$"},
        )
    ]
    async with open_chat(tmp_path, agents, plugins=()) as chat:
        chat.type("ask me\r")
        shown = await chat.wait_for("press Enter > ")
        chat.type("blue\r")
        rest = await chat.turn_end()
        await chat.quit()
    assert shown.splitlines() == [
        '⚙ ask_user question="Which colour?"',
        "Question from the agent: Which colour?",
        "  type your answer and press Enter > ",
    ]
    assert rest.splitlines()[1:4] == ["  ↳ blue", "  → blue", "Blue it is."]


async def test_questions_from_two_children_queue_and_are_answered_in_turn(
    tmp_path: Path,
) -> None:
    def child(label: str) -> dict[str, object]:
        return {
            "match": {"depth": 1, "label": label},
            "steps": [
                {"tool_calls": [call("write", path=f"{label}.txt", content=label)]},
                {"text": f"{label} done"},
            ],
        }

    agents = [
        root_steps(
            {
                "tool_calls": [
                    call("subagent", description="alpha", prompt="Write alpha.txt."),
                    call("subagent", description="beta", prompt="Write beta.txt."),
                ]
            },
            {"text": "Both started."},
            {"text": "One finished."},
            {"text": "Both finished."},
        ),
        child("alpha"),
        child("beta"),
    ]
    async with open_chat(tmp_path, agents, plugins=("root_approvals",)) as chat:
        chat.type("delegate\r")
        first = await chat.wait_for("Reject (default) > ")
        for _ in range(2000):
            if chat.app.approvals.waiting == 1:
                break
            await asyncio.sleep(0.01)
        assert chat.app.approvals.waiting == 1
        assert "1 more approval waiting" in chat.app._busy_text()[-1][1]
        chat.type("a")
        second = await chat.wait_for("Reject (default) > ")
        chat.type("r")
        rest = await chat.turn_end()
        await chat.quit()
    allowed = "alpha" if "asked by: subagent [alpha]" in first else "beta"
    rejected = "beta" if allowed == "alpha" else "alpha"
    assert f"asked by: subagent [{rejected}]" in second
    assert (chat.workspace / f"{allowed}.txt").read_text() == allowed
    assert not (chat.workspace / f"{rejected}.txt").exists()
    assert "approvals: 2 asked, 1 granted, 1 denied · 2 children spawned" in rest
