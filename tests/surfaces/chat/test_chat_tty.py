"""``tether chat`` as a real process on a pseudo-terminal: type a prompt, answer the approval
at the keyboard, quit with Ctrl-D."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from tether.session.json import thaw
from tether.session.persistence import open_persistence
from tether.surfaces.cli.chat.prompts import answerer_name

TETHER = str(Path(sys.executable).parent / "tether")


def read_until(fd: int, needle: bytes, deadline: float) -> bytes:
    seen = b""
    while needle not in seen:
        if time.monotonic() > deadline:
            raise AssertionError(f"never saw {needle!r}; got {seen[-2000:]!r}")
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    return seen


def script(path: Path) -> Path:
    path.write_text(
        json.dumps(
            {
                "agents": [
                    {
                        "match": {},
                        "steps": [
                            {
                                "text": "Writing t.txt.",
                                "tool_calls": [
                                    {
                                        "name": "write",
                                        "arguments": {"path": "t.txt", "content": "t"},
                                    }
                                ],
                            },
                            {"text": "finished writing"},
                        ],
                    }
                ]
            }
        )
    )
    return path


def spawn(args: list[str], tmp_path: Path) -> tuple[subprocess.Popen[bytes], int]:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    env = {k: v for k, v in os.environ.items() if k != "TETHER_STORE"}
    # No terminal emulator answers cursor-position requests on a bare pty.
    env.update(TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1", HOME=str(tmp_path), COLUMNS="160")
    proc = subprocess.Popen(
        [TETHER, "chat", *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
        env=env,
        start_new_session=True,
    )
    os.close(slave)
    return proc, master


@pytest.mark.timeout(90)
def test_a_prompt_and_an_approval_answered_at_a_real_terminal(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    db = tmp_path / "s.db"
    proc, master = spawn(
        [
            "--model",
            f"scripted:{script(tmp_path / 's.json')}",
            "--workspace",
            str(workspace),
            "--store",
            f"sqlite:///{db}",
            "--plugin",
            "ask_tools",
        ],
        tmp_path,
    )
    try:
        banner = read_until(master, "›".encode(), time.monotonic() + 40)
        assert b"tether chat" in banner
        os.write(master, b"please write\r")
        shown = read_until(master, b"Reject (default) >", time.monotonic() + 40)
        assert b"Approval needed: tool 'write'" in shown
        assert b'reason: run "write": t.txt' in shown
        assert b"path: t.txt" in shown
        os.write(master, b"a")
        rest = read_until(master, b"finished writing", time.monotonic() + 40)
        rest += read_until(master, b"approvals: 1 asked, 1 granted", time.monotonic() + 40)
        assert b"allowed once" in rest
        read_until(master, "›".encode(), time.monotonic() + 40)
        os.write(master, b"\x04")
        read_until(master, b"continue with: tether chat --resume", time.monotonic() + 40)
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.wait()
        os.close(master)
    assert (workspace / "t.txt").read_text() == "t"
    assert (tmp_path / ".local" / "share" / "tether" / "chat_history").read_text().count(
        "please write"
    ) == 1
    audit = asyncio.run(audit_pairs(f"sqlite:///{db}"))
    assert [(kind, data.get("outcome")) for kind, data in audit] == [
        ("approval/asked", None),
        ("approval/decided", "allowed-once"),
    ]
    assert audit[1][1]["answered_by"] == answerer_name()


async def audit_pairs(url: str) -> list[tuple[str, dict[str, object]]]:
    persistence = open_persistence(url)
    try:
        (header,) = await persistence.list()
        stored = await persistence.inspect(header.id)
    finally:
        await persistence.close()
    return [
        (e.type, dict(thaw(e.data)))
        for e in stored.events
        if e.type in ("approval/asked", "approval/decided")
    ]


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
