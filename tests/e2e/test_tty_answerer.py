"""The terminal answerer, driven through a real pseudo-terminal."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from cli_support import TETHER
from pty_support import read_until
from tether.surfaces.cli._tty_answerer import parse_reply


@pytest.mark.parametrize(
    ("reply", "outcome"),
    [
        ("a\n", "allowed-once"),
        ("Allow", "allowed-once"),
        ("\n", "rejected"),
        ("r", "rejected"),
        (None, "unavailable"),
        ("maybe", "retry"),
    ],
)
def test_parse_reply(reply: str | None, outcome: str) -> None:
    assert parse_reply(reply) == outcome


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("answer", "written", "said"),
    [
        (b"a\n", True, b"allowed-once"),
        (b"r\n", False, b"rejected"),
        (b"s2\n", True, b"allowed-for-session: Write(./**)"),
        (b"w\n", True, b"allowed-always: Write(./t.txt)"),
    ],
)
def test_prompt_at_the_terminal_decides_the_write(
    tmp_path: Path, answer: bytes, written: bool, said: bytes
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = tmp_path / "s.json"
    script.write_text(
        json.dumps(
            {
                "agents": [
                    {
                        "match": {},
                        "steps": [
                            {
                                "tool_calls": [
                                    {
                                        "name": "write",
                                        "arguments": {"path": "t.txt", "content": "t"},
                                    }
                                ]
                            },
                            {"text": "finished"},
                        ],
                    }
                ]
            }
        )
    )
    master, slave = os.openpty()
    proc = subprocess.Popen(
        [
            TETHER,
            "run",
            "--model",
            f"scripted:{script}",
            "--workspace",
            str(workspace),
            "--store",
            f"sqlite:///{tmp_path / 's.db'}",
            "--plugin",
            "ask_tools",
            "go",
        ],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
    )
    os.close(slave)
    try:
        shown = read_until(master, b"> ", timeout=40)
        assert b'Approval needed: tool "write"' in shown
        assert b'reason: run "write": t.txt' in shown
        assert b"path: t.txt" in shown
        assert b"    1. Write(./t.txt)\r\n    2. Write(./**)\r\n    3. Write\r\n" in shown
        assert b"[s] Allow for this session   [w] Always allow in this workspace" in shown
        os.write(master, answer)
        rest = read_until(master, b"finished", timeout=40)
        assert said in rest
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        os.close(master)
    assert (workspace / "t.txt").exists() is written
