"""A ``tether chat`` question answered from another terminal: a real chat on a pseudo-terminal,
and ``tether approvals list``/``answer`` run beside it (siblings of the chat, as another
terminal's commands are). The first answer wins, and each surface says who gave it."""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import re
import time
from pathlib import Path

import pytest
from tty_support import Terminal, audit_pairs, chat, chat_args, stored_events

from cli_support import tether
from script_support import call, write_script
from tether.session._answer_box import AnswerBox
from tether.session._answer_wait import NO_PROOF
from tether.surfaces.cli.chat._prompts import chat_answerer

pytestmark = pytest.mark.timeout(120)

USER = pwd.getpwuid(os.getuid()).pw_name
STYLING = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def plain(shown: bytes) -> str:
    """What the terminal shows, without tether's own styling and carriage returns."""
    return STYLING.sub(b"", shown).replace(b"\r", b"").decode()


def waiting_rows(store: str, count: int = 1) -> list[dict[str, object]]:
    """The approvals someone waits for, once ``count`` of them are in the store (the chat
    stores what it asks a moment after asking it)."""
    for _ in range(400):
        listed = tether("approvals", "list", "--store", store, "--json")
        assert listed.returncode == 0, listed.stderr
        rows = [row for row in json.loads(listed.stdout) if row["waiting"]]
        if len(rows) >= count:
            return rows
        time.sleep(0.05)
    raise AssertionError(f"{count} answerable approvals never showed in the store")


def ask(term: Terminal, prompt: bytes = b"please write\r") -> str:
    """Type a prompt at the chat; what it shows until its question's choices."""
    term.wait_for("›".encode())
    term.type(prompt)
    return plain(term.wait_for(b"Reject (default) >"))


def workspace_and_store(tmp_path: Path) -> tuple[Path, str]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace, f"sqlite:///{tmp_path / 's.db'}"


def test_a_chat_question_is_answered_from_another_terminal(tmp_path: Path) -> None:
    workspace, store = workspace_and_store(tmp_path)
    with chat(chat_args(tmp_path, workspace, "--plugin", "ask_tools"), tmp_path) as term:
        question = ask(term)
        (row,) = waiting_rows(store)
        approval_id = str(row["id"])
        # the line as written (wider than the terminal's 160 columns, it wraps at a space)
        assert (
            f"  from another terminal: tether approvals answer {approval_id[:8]} "
            f"allow|allow-session|allow-always|reject --store {store}\n"
        ) in question.replace("--store \n", "--store ")
        text = tether("approvals", "list", "--store", store)
        assert f"{approval_id}  " in text.stdout and "  yes  " in text.stdout
        answered = tether("approvals", "answer", approval_id[:8], "allow", "--store", store)
        assert answered.returncode == 0, answered.stderr
        closed = plain(term.wait_for(b"finished writing"))
        term.wait_for(b"approvals: 1 asked, 1 granted")
    audit = asyncio.run(audit_pairs(store))
    by = str(audit[1][1]["answered_by"])
    assert re.fullmatch(rf"tether approvals answer \({USER}, pid \d+\)", by)
    assert answered.stdout == (
        f"{approval_id}: allowed-once (write in session {row['session']}; recorded as answered "
        f"by {by})\n"
    )
    # the question closes saying who answered, once: the transcript does not repeat it
    assert closed.count(f"  ✔ allowed once · answered by {by}\n") == 1
    assert "approval allowed-once by" not in closed
    assert (workspace / "t.txt").read_text() == "t"
    assert [(kind, data.get("outcome")) for kind, data in audit] == [
        ("approval/asked", None),
        ("approval/decided", "allowed-once"),
    ]
    listed = tether("approvals", "list", "--store", store, "--json")
    assert json.loads(listed.stdout) == []


def test_an_answer_given_at_the_chat_keyboard_first_makes_another_terminals_late(
    tmp_path: Path,
) -> None:
    workspace, store = workspace_and_store(tmp_path)
    with chat(chat_args(tmp_path, workspace, "--plugin", "ask_tools"), tmp_path) as term:
        ask(term)
        (row,) = waiting_rows(store)
        term.type(b"r")
        term.wait_for(b"approvals: 1 asked, 0 granted")
        late = tether("approvals", "answer", str(row["id"]), "allow", "--store", store)
    assert (late.returncode, late.stderr) == (
        1,
        f"tether: APPROVAL_ALREADY_ANSWERED: approval {row['id']} was already answered "
        f"(rejected, by {chat_answerer()}): this answer came too late\n",
    )
    assert not (workspace / "t.txt").exists()
    audit = asyncio.run(audit_pairs(store))
    assert audit[1][1] == {"id": row["id"], "outcome": "rejected", "answered_by": chat_answerer()}


def test_a_file_written_into_the_answer_box_answers_nothing_and_is_recorded(
    tmp_path: Path,
) -> None:
    workspace, store = workspace_and_store(tmp_path)
    box = AnswerBox.for_store(store)
    with chat(chat_args(tmp_path, workspace, "--plugin", "ask_tools"), tmp_path) as term:
        ask(term)
        (row,) = waiting_rows(store)
        approval_id = str(row["id"])
        (box.directory / f"{approval_id}.json").write_text('{"outcome": "allowed-once"}')
        refused = plain(term.wait_for(b"through the waiting run's socket"))
        # (the line wraps at the terminal's width)
        said = f"refused an answer to approval {approval_id}: {NO_PROOF}"
        assert " ".join(said.split()) in " ".join(refused.split())
        term.type(b"r")
        term.wait_for(b"approvals: 1 asked, 0 granted")
    assert not (workspace / "t.txt").exists()
    audit = ("approval/asked", "approval/answer-refused", "approval/decided")
    asked, refused_event, decided = asyncio.run(stored_events(store, *audit))
    assert (asked[0], decided[0], decided[1]["outcome"]) == (
        "approval/asked",
        "approval/decided",
        "rejected",
    )
    assert refused_event == (
        "approval/answer-refused",
        {
            "id": approval_id,
            "via": "answer-box",
            "reason": "no-proof",
            "detail": NO_PROOF,
            "file": f"{approval_id}.json",
            "claimed_outcome": "allowed-once",
        },
    )


def test_a_question_waiting_its_turn_in_chat_can_be_answered_from_another_terminal(
    tmp_path: Path,
) -> None:
    """Two children ask at once: one question is on screen, the other queued behind it. Both
    are answerable from another terminal from the moment they are asked."""
    workspace, store = workspace_and_store(tmp_path)

    def child(label: str) -> dict[str, object]:
        return {
            "match": {"depth": 1, "label": label},
            "steps": [
                call("write", path=f"{label}.txt", content=label),
                {"text": f"{label} done"},
            ],
        }

    model = write_script(
        tmp_path / "two.json",
        [
            {
                "match": {"depth": 0},
                "steps": [
                    {
                        "tool_calls": [
                            {
                                "name": "subagent",
                                "arguments": {"description": label, "prompt": f"Write {label}."},
                            }
                            for label in ("alpha", "beta")
                        ]
                    },
                    {"text": "Both started."},
                    {"text": "One finished."},
                    {"text": "Both finished."},
                ],
            },
            child("alpha"),
            child("beta"),
        ],
    )
    with chat(
        chat_args(tmp_path, workspace, "--plugin", "root_approvals", model=model), tmp_path
    ) as term:
        shown = ask(term, b"delegate\r")
        on_screen = re.findall(r"tether approvals answer ([0-9a-f]{8}) ", shown)[-1]
        rows = waiting_rows(store, 2)
        (queued,) = [r for r in rows if not str(r["id"]).startswith(on_screen)]
        answered = tether("approvals", "answer", str(queued["id"]), "allow", "--store", store)
        assert answered.returncode == 0, answered.stderr
        early = plain(term.wait_for(b"answered by tether approvals answer"))
        term.type(b"r")
        rest = plain(term.wait_for(b"approvals: 2 asked, 1 granted, 1 denied"))
    label = "alpha" if "[alpha]" in early else "beta"
    other = "beta" if label == "alpha" else "alpha"
    assert f'approval for "write" asked by [{label}] ' in early
    assert "was answered before it was shown here:\n  ✔ allowed once · answered by " in early
    assert (workspace / f"{label}.txt").read_text() == label
    assert not (workspace / f"{other}.txt").exists()
    assert "✘ rejected" in rest
