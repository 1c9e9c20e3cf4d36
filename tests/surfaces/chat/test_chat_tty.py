"""``tether chat`` as a real process on a pseudo-terminal: type a prompt, answer the approval
at the keyboard, quit with Ctrl-D."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest
from tty_support import audit_pairs, chat, chat_args

from cli_support import TETHER
from tether.surfaces.cli.chat._prompts import chat_answerer


@pytest.mark.timeout(90)
def test_a_prompt_and_an_approval_answered_at_a_real_terminal(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    db = tmp_path / "s.db"
    with chat(chat_args(tmp_path, workspace, "--plugin", "ask_tools"), tmp_path) as term:
        banner = term.wait_for("›".encode())
        assert b"tether chat" in banner
        term.type(b"please write\r")
        shown = term.wait_for(b"Reject (default) >")
        assert b'Approval needed: tool "write"' in shown
        assert b'reason: run "write": t.txt' in shown
        assert b"path: t.txt" in shown
        term.type(b"a")
        rest = term.wait_for(b"finished writing")
        rest += term.wait_for(b"approvals: 1 asked, 1 granted")
        assert b"allowed once" in rest
    assert (workspace / "t.txt").read_text() == "t"
    assert (tmp_path / ".local" / "share" / "tether" / "chat_history").read_text().count(
        "please write"
    ) == 1
    audit = asyncio.run(audit_pairs(f"sqlite:///{db}"))
    assert [(kind, data.get("outcome")) for kind, data in audit] == [
        ("approval/asked", None),
        ("approval/decided", "allowed-once"),
    ]
    assert audit[1][1]["answered_by"] == chat_answerer()


def test_chat_needs_a_terminal(tmp_path: Path) -> None:
    result = subprocess.run(
        [TETHER, "chat", "--model", "scripted:/nonexistent.json"],
        input=b"hello\n",
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr == (
        b"tether: chat: needs a terminal on stdin and stdout (use `tether run` for scripts)\n"
    )


@pytest.mark.timeout(90)
def test_chat_starts_in_the_preset_its_flag_names(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with chat(chat_args(tmp_path, workspace, "--permission", "plan"), tmp_path) as term:
        term.wait_for("›".encode())
        term.type(b"/permission\r")
        shown = term.wait_for(b"#presets).")
        assert b"permission preset: plan (sandbox read-only, approval ask)" in shown
        assert b"  * plan " in shown
