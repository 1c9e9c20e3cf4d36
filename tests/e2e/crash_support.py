"""Killing ``tether run --json`` and comparing what it printed with what its store holds
(no tests here): used by ``test_durable_stream.py`` and ``test_crash_harness.py``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from cli_support import TETHER
from tether.session._json import thaw
from tether.session.persistence import SessionNotFoundError, open_persistence

Line = dict[str, Any]


def approver(tmp: Path, answer: str = "allowed-once") -> str:
    """A ``--approver`` program that answers every request ``answer``."""
    program = tmp / "approver.py"
    program.write_text(f"import sys\nsys.stdin.read()\nprint({answer!r})\n")
    return f"{sys.executable} {program}"


def start(args: list[str]) -> subprocess.Popen[bytes]:
    """``tether ARGS`` in a process group of its own (so a kill takes its commands too), its
    stdout a pipe read line by line."""
    return subprocess.Popen(
        [TETHER, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def kill(proc: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """SIGKILL the run's whole process group; the rest of what it printed, and its stderr."""
    with contextlib.suppress(ProcessLookupError):  # it had ended and its group was gone
        os.killpg(proc.pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    return out, err


def printed(out: bytes) -> list[Line]:
    """The complete JSON lines of a stream; a line torn by the kill was never printed."""
    lines: list[Line] = []
    for raw in out.split(b"\n"):
        try:
            lines.append(json.loads(raw))
        except ValueError:
            continue  # the torn last line (or the empty rest after the final newline)
    return lines


def events_printed(lines: list[Line]) -> list[Line]:
    return [line for line in lines if line.get("type") != "run/result"]


def stored_events(store: str, session_id: str) -> list[Line] | None:
    """The stored events of ``session_id`` as ``--json`` prints them, read without repairing
    anything; ``None`` when the session was never stored."""

    async def read() -> list[Line] | None:
        persistence = open_persistence(store)
        try:
            stored = await persistence.inspect(session_id)
        except SessionNotFoundError:
            return None
        finally:
            await persistence.close()
        return [
            {"session": session_id, "seq": e.seq, "type": e.type, "data": thaw(e.data)}
            for e in stored.events[: len(stored.events) - len(stored.repair.synthesized)]
        ]

    return asyncio.run(read())


def missing_from_store(store: str, lines: list[Line]) -> list[Line]:
    """The printed events the store does not hold unchanged (same session, seq, type, data)."""
    by_session: dict[str, list[Line] | None] = {}
    missing = []
    for line in events_printed(lines):
        session = str(line["session"])
        if session not in by_session:
            by_session[session] = stored_events(store, session)
        events = by_session[session]
        seq = int(line["seq"])
        if events is None or seq >= len(events) or events[seq] != line:
            missing.append(line)
    return missing
