"""Drive ``tether chat`` as a real process on a pseudo-terminal: the master side of the pty,
a scripted model, and the stored approval audit."""

from __future__ import annotations

import fcntl
import json
import os
import select
import struct
import subprocess
import termios
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cli_support import TETHER
from tether.session._json import thaw
from tether.session.persistence import open_persistence


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
    # The user's directories all derive from HOME here (the history file's default place).
    dropped = ("TETHER_STORE", "XDG_CONFIG_HOME", "XDG_DATA_HOME")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
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


def chat_args(tmp_path: Path, workspace: Path, *extra: str, model: Path | None = None) -> list[str]:
    """``tether chat`` over ``workspace`` with the script of :func:`script` (or ``model``)
    and a SQLite store at ``tmp_path / "s.db"``."""
    return [
        "--model",
        f"scripted:{model or script(tmp_path / 's.json')}",
        "--workspace",
        str(workspace),
        "--store",
        f"sqlite:///{tmp_path / 's.db'}",
        *extra,
    ]


@contextmanager
def chat(args: list[str], tmp_path: Path) -> Iterator[Terminal]:
    """A running ``tether chat``; once the body is done, quit it at its next prompt (Ctrl-D)
    and check it exits 0. The process is killed however the body ends."""
    proc, master = spawn(args, tmp_path)
    term = Terminal(master)
    try:
        yield term
        term.wait_for("›".encode())
        term.type(b"\x04")
        term.wait_for(b"continue with: tether chat --resume")
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.wait()
        os.close(master)


async def stored_events(url: str, *types: str) -> list[tuple[str, dict[str, object]]]:
    """The events of the store's one session (only those of ``types``, when given)."""
    persistence = open_persistence(url)
    try:
        (header,) = await persistence.list()
        stored = await persistence.inspect(header.id)
    finally:
        await persistence.close()
    return [(e.type, dict(thaw(e.data))) for e in stored.events if not types or e.type in types]


async def audit_pairs(url: str) -> list[tuple[str, dict[str, object]]]:
    return await stored_events(url, "approval/asked", "approval/decided")
