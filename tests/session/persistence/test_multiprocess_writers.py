"""Several processes appending to one store, and to one session, at the same time.

Each writer process appends its own numbered events to a shared session one at a time. When it
loses a race it gets SeqConflictError, re-reads the stored length and tries again. Afterwards
the log must be contiguous and hold every writer's events exactly once, in each writer's order:
the backend serialised the processes and never let one overwrite another.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from tether.session.persistence import open_persistence

WRITERS = 3
EVENTS_EACH = 100

WRITER = r"""
import asyncio, sys

from tether.session import Event, SessionHeader
from tether.session.persistence import (
    SeqConflictError, SessionExistsError, open_persistence,
)


async def main(url: str, name: str, count: int) -> None:
    backend = open_persistence(url)
    try:
        await backend.create(SessionHeader("shared", 1))
    except SessionExistsError:
        pass
    await backend.create(SessionHeader(f"own-{name}", 1))
    print("ready", flush=True)
    sys.stdin.readline()  # start together, so the writers really race
    length = 0
    conflicts = 0
    for n in range(count):
        while True:
            event = Event.make("session/title", length, 1, {"writer": name, "n": n})
            try:
                await backend.append("shared", [event])
                break
            except SeqConflictError:
                conflicts += 1
                length = len((await backend.inspect("shared")).events)
        length += 1
        await backend.append(f"own-{name}", [Event.make("session/title", n, 1, {"n": n})])
    await backend.close()
    print(conflicts)


asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("scheme", ["sqlite", "jsonl"])
async def test_concurrent_processes_serialise_on_one_session(scheme: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/store.db" if scheme == "sqlite" else f"jsonl://{tmp_path}/logs"
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(script),
            url,
            f"w{index}",
            str(EVENTS_EACH),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for index in range(WRITERS)
    ]
    for process in processes:
        assert process.stdout is not None
        assert await process.stdout.readline() == b"ready\n"
    results = await asyncio.gather(*(process.communicate(b"go\n") for process in processes))
    for process, (_, stderr) in zip(processes, results, strict=True):
        assert process.returncode == 0, stderr.decode()

    backend = open_persistence(url)
    try:
        shared = await backend.load("shared")
        assert [e.seq for e in shared.events] == list(range(WRITERS * EVENTS_EACH))
        assert not shared.repair.changed
        for index in range(WRITERS):
            name = f"w{index}"
            mine = [e.data["n"] for e in shared.events if e.data["writer"] == name]
            assert mine == list(range(EVENTS_EACH))
            own = await backend.load(f"own-{name}")
            assert [e.data["n"] for e in own.events] == list(range(EVENTS_EACH))
        assert sorted(h.id for h in await backend.list()) == [
            "own-w0",
            "own-w1",
            "own-w2",
            "shared",
        ]
    finally:
        await backend.close()
