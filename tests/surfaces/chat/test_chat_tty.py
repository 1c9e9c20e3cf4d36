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


class Terminal:
    """The master side of the pty: everything read is kept, and each wait starts where the
    previous one's needle ended (a chunk may carry more than one needle)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.seen = b""
        self.mark = 0

    def wait_for(self, needle: bytes, timeout: float = 40) -> bytes:
        deadline = time.monotonic() + timeout
        while (found := self.seen.find(needle, self.mark)) < 0:
            if time.monotonic() > deadline:
                raise AssertionError(f"never saw {needle!r}; got {self.seen[self.mark :]!r}")
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"end of output before {needle!r}")
                self.seen += chunk
        shown = self.seen[self.mark : found + len(needle)]
        self.mark = found + len(needle)
        return shown

    def type(self, data: bytes) -> None:
        os.write(self.fd, data)


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
    term = Terminal(master)
    try:
        banner = term.wait_for("›".encode())
        assert b"tether chat" in banner
        term.type(b"please write\r")
        shown = term.wait_for(b"Reject (default) >")
        assert b"Approval needed: tool 'write'" in shown
        assert b'reason: run "write": t.txt' in shown
        assert b"path: t.txt" in shown
        term.type(b"a")
        rest = term.wait_for(b"finished writing")
        rest += term.wait_for(b"approvals: 1 asked, 1 granted")
        assert b"allowed once" in rest
        term.wait_for("›".encode())
        term.type(b"\x04")
        term.wait_for(b"continue with: tether chat --resume")
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
