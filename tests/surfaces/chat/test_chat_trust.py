"""``tether chat`` asks at start when the workspace's configuration is new or changed: a real
process on a pseudo-terminal, a workspace ``tether.toml`` that makes ``write`` ask, and the
trust record checked on disk afterwards."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from tty_support import audit_pairs, chat, chat_args

from tether.kernel._trust_store import TrustStore

ASK_WRITES = '[[plugins]]\nname = "ask_tools"\nconfig = { tools = ["write"] }\n'
QUESTION = b"Trust this configuration for this workspace? [y/N]: "

pytestmark = pytest.mark.timeout(90)


def workspace_asking_for_writes(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "tether.toml").write_text(ASK_WRITES)
    return workspace


def recorded(tmp_path: Path, workspace: Path) -> list[str] | None:
    """The files of the trust record (tty_support derives the user's dirs from HOME)."""
    record = TrustStore.for_user({"HOME": str(tmp_path)}).get(os.path.realpath(workspace))
    return None if record is None else sorted(record.files)


def test_yes_records_the_trust_shown_and_the_configuration_applies(tmp_path: Path) -> None:
    workspace = workspace_asking_for_writes(tmp_path)
    root = os.path.realpath(workspace)
    with chat(chat_args(tmp_path, workspace), tmp_path) as term:
        shown = term.wait_for(QUESTION)
        assert f"workspace {root}\r\n".encode() in shown
        assert f"tether.toml: new ({len(ASK_WRITES)} bytes, sha256:".encode() in shown
        assert b'  | name = "ask_tools"\r\n  | config = { tools = ["write"] }\r\n' in shown
        term.type(b"y\r")
        term.wait_for(f"trusted {root}\r\n".encode())
        term.wait_for("›".encode())
        term.type(b"please write\r")
        asked = term.wait_for(b"Reject (default) >")  # the workspace's ask_tools is in effect
        assert b'Approval needed: tool "write"' in asked
        term.type(b"r")
        term.wait_for(b"approvals: 1 asked, 0 granted")
    assert recorded(tmp_path, workspace) == ["tether.toml"]
    assert not (workspace / "t.txt").exists()
    audit = asyncio.run(audit_pairs(f"sqlite:///{tmp_path / 's.db'}"))
    assert [(kind, data.get("outcome")) for kind, data in audit] == [
        ("approval/asked", None),
        ("approval/decided", "rejected"),
    ]


def test_no_runs_without_the_workspace_configuration_and_says_so(tmp_path: Path) -> None:
    workspace = workspace_asking_for_writes(tmp_path)
    root = os.path.realpath(workspace)
    with chat(chat_args(tmp_path, workspace), tmp_path) as term:
        term.wait_for(QUESTION)
        term.type(b"n\r")
        said = term.wait_for(b"tether chat")
        assert (
            "running without this workspace's configuration (tether.toml not used); to use it: "
            f"tether trust --workspace {root}"
        ).encode() in said
        term.wait_for("›".encode())
        term.type(b"please write\r")
        done = term.wait_for(b"finished writing")  # no ask_tools: the write just runs
        assert b"Approval needed" not in done
    assert recorded(tmp_path, workspace) is None
    assert (workspace / "t.txt").read_text() == "t"
    assert asyncio.run(audit_pairs(f"sqlite:///{tmp_path / 's.db'}")) == []
