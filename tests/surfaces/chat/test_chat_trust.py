"""``tether chat`` asks at start when the workspace's configuration is new or changed: a real
process on a pseudo-terminal, a workspace ``tether.toml`` that makes ``write`` ask, and the
trust record checked on disk afterwards."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest
from tty_support import Terminal, audit_pairs, script, spawn

from tether.kernel import TrustStore

ASK_WRITES = '[[plugins]]\nname = "ask_tools"\nconfig = { tools = ["write"] }\n'
QUESTION = b"Trust this configuration for this workspace? [y/N]: "


def start(tmp_path: Path) -> tuple[Path, str, Terminal, subprocess.Popen[bytes]]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "tether.toml").write_text(ASK_WRITES)
    db = f"sqlite:///{tmp_path / 's.db'}"
    proc, master = spawn(
        [
            "--model",
            f"scripted:{script(tmp_path / 's.json')}",
            "--workspace",
            str(workspace),
            "--store",
            db,
        ],
        tmp_path,
    )
    return workspace, db, Terminal(master), proc


def records(tmp_path: Path) -> TrustStore:
    # tty_support derives every user directory from HOME=tmp_path.
    return TrustStore.for_user({"HOME": str(tmp_path)})


@pytest.mark.timeout(90)
def test_yes_records_the_trust_shown_and_the_configuration_applies(tmp_path: Path) -> None:
    workspace, db, term, proc = start(tmp_path)
    root = os.path.realpath(workspace)
    try:
        shown = term.wait_for(QUESTION)
        assert f"workspace {root}\r\n".encode() in shown
        assert f"tether.toml: new ({len(ASK_WRITES)} bytes, sha256:".encode() in shown
        assert b'  | name = "ask_tools"\r\n  | config = { tools = ["write"] }\r\n' in shown
        term.type(b"y\r")
        term.wait_for(f"trusted {root}\r\n".encode())
        term.wait_for("›".encode())
        term.type(b"please write\r")
        asked = term.wait_for(b"Reject (default) >")  # the workspace's ask_tools is in effect
        assert b"Approval needed: tool 'write'" in asked
        term.type(b"r")
        term.wait_for(b"approvals: 1 asked, 0 granted")
        term.wait_for("›".encode())
        term.type(b"\x04")
        term.wait_for(b"continue with: tether chat --resume")
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.wait()
        os.close(term.fd)
    record = records(tmp_path).get(root)
    assert record is not None
    assert sorted(record.files) == ["tether.toml"]
    assert not (workspace / "t.txt").exists()
    audit = asyncio.run(audit_pairs(db))
    assert [(kind, data.get("outcome")) for kind, data in audit] == [
        ("approval/asked", None),
        ("approval/decided", "rejected"),
    ]


@pytest.mark.timeout(90)
def test_no_runs_without_the_workspace_configuration_and_says_so(tmp_path: Path) -> None:
    workspace, db, term, proc = start(tmp_path)
    root = os.path.realpath(workspace)
    try:
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
        term.wait_for("›".encode())
        term.type(b"\x04")
        term.wait_for(b"continue with: tether chat --resume")
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.wait()
        os.close(term.fd)
    assert records(tmp_path).get(root) is None
    assert (workspace / "t.txt").read_text() == "t"
    assert asyncio.run(audit_pairs(db)) == []
