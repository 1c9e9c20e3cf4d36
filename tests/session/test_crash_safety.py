"""Crash safety, for real: child processes appending to a store are killed with SIGKILL.

Each child runs a session through a :class:`SessionStore` on a real backend: turns with steps,
tool calls, and approval asked/decided pairs, flushing after every decision and every turn, and
printing each event to stdout once a flush has returned (it is then committed). The parent
kills it at a random moment, then checks the stored log:

- it loads (after repair) and every event the child reported as committed is there, unchanged;
- an ``approval/asked`` without its ``approval/decided`` exists only when the crash fell between
  the two: it is then the last stored event and the repair report lists it (what fsck shows);
- the repaired log ends with every turn closed.

A second child then resumes the session (its load repairs the log durably) and is killed in
turn, and the same checks run over both rounds. Several children share one store at a time, so
the backends' multi-process locking is exercised too.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tether.session import Event
from tether.session._session import has_open_turn
from tether.session.persistence import SessionNotFoundError, open_persistence

TRIALS = 25
PARALLEL = 4

CHILD = r"""
import asyncio, json, random, sys

from tether.session import SessionMeta, SessionStore
from tether.session._json import thaw
from tether.session.persistence import SessionNotFoundError, open_persistence


async def main(url: str, session_id: str, seed: int) -> None:
    rng = random.Random(seed)
    store = SessionStore(open_persistence(url))
    try:
        session = await store.open(session_id)
    except SessionNotFoundError:
        session = store.create(session_id, meta=SessionMeta(cwd="/tmp"))
    reported = 0

    async def commit() -> None:
        nonlocal reported
        await store.flush(session)
        lines = [
            json.dumps({"seq": e.seq, "type": e.type, "data": thaw(e.data)}) + "\n"
            for e in session.events[reported:]
        ]
        reported = len(session)
        sys.stdout.write("".join(lines))
        sys.stdout.flush()

    await commit()
    turn = sum(1 for e in session.events if e.type == "turn/start")
    while True:
        turn += 1
        session.append("turn/start", {"turn": turn})
        text = "ünïcode ✓ " * rng.choice([1, 10, 400])
        session.append("user/message", {"content": text, "source": "user"}, surface_op="append")
        await asyncio.sleep(0)
        for step in range(1, rng.randint(1, 2) + 1):
            session.append("step/start", {"step": step})
            for k in range(rng.randint(1, 3)):
                call_id = f"t{turn}s{step}c{k}"
                name = rng.choice(["bash", "write", "read"])
                arguments = json.dumps({"cmd": "x" * rng.choice([5, 500, 5000])})
                session.append("tool/call", {"call_id": call_id, "name": name, "arguments": arguments})
                if rng.random() < 0.6:
                    approval = f"ap-{turn}-{step}-{k}"
                    session.append(
                        "approval/asked", {"id": approval, "tool_name": name, "call_id": call_id}
                    )
                    await asyncio.sleep(0)  # the writer may store the question on its own
                    outcome = rng.choice(["allowed-once", "rejected"])
                    session.append("approval/decided", {"id": approval, "outcome": outcome})
                    await commit()  # audit before effect
                await asyncio.sleep(0)
                session.append(
                    "tool/result",
                    {"call_id": call_id, "name": name, "content": "out " * rng.randint(1, 3000),
                     "is_error": False},
                    surface_op="append",
                )
            session.append("step/end", {"step": step})
        session.append("assistant/message", {"content": f"done {turn}"}, surface_op="append")
        session.append("turn/end", {"turn": turn, "reason": "completed"})
        if rng.random() < 0.3:
            session.append("approval/policy", {"policy": rng.choice(["ask", "never"])})
        await commit()


asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


@dataclass
class Trial:
    session_id: str
    seed: int
    committed: dict[int, dict[str, object]] = field(default_factory=dict)
    first_view: list[dict[str, object]] | None = None
    first_committed: int = 0
    reports: list[str] = field(default_factory=list)


async def run_child(script: Path, url: str, trial: Trial, rng: random.Random) -> None:
    """Start a child, SIGKILL it at a random moment, and record what it reported committed.

    One kill in five lands at a random time after spawn (during start-up, or inside the
    resume's repair); the others at a random time after the child's first commit.
    """
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        url,
        trial.session_id,
        str(trial.seed),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    stdout = process.stdout
    lines: list[bytes] = []
    first_commit = asyncio.Event()

    async def read() -> None:
        while line := await stdout.readline():
            lines.append(line)
            first_commit.set()

    reader = asyncio.ensure_future(read())
    errors = asyncio.ensure_future(process.stderr.read())
    if rng.random() < 0.2:
        await asyncio.sleep(rng.uniform(0.0, 0.3))
    else:
        exited = asyncio.ensure_future(process.wait())
        committed = asyncio.ensure_future(first_commit.wait())
        await asyncio.wait({exited, committed}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
        exited.cancel()
        committed.cancel()
        await asyncio.sleep(rng.uniform(0.0, 0.25))
    if process.returncode is None:
        process.send_signal(signal.SIGKILL)
    await process.wait()
    await reader
    stderr = await errors
    assert process.returncode == -signal.SIGKILL, (
        f"child for {trial.session_id} exited by itself ({process.returncode}): "
        f"{stderr.decode(errors='replace')}"
    )
    for line in lines:
        if not line.endswith(b"\n"):
            continue  # cut by the kill
        record = json.loads(line)
        seq = record["seq"]
        assert trial.committed.get(seq, record) == record, f"seq {seq} reported twice, differently"
        trial.committed[seq] = record


async def check_log(url: str, trial: Trial, *, repair: bool) -> None:
    """The stored log keeps every committed event and repairs to closed turns."""
    backend = open_persistence(url)
    try:
        try:
            view = await backend.inspect(trial.session_id)
        except SessionNotFoundError:
            assert trial.committed == {}, f"{trial.session_id}: committed events vanished"
            return
        synthesized = len(view.repair.synthesized)
        stored = view.events[: len(view.events) - synthesized]
        for seq, record in trial.committed.items():
            assert seq < len(stored), f"{trial.session_id}: committed seq {seq} lost"
            event = stored[seq]
            assert {"seq": event.seq, "type": event.type, "data": event.to_dict()["data"]} == record
        check_approvals(trial, stored, view.repair.unmatched_approvals)
        assert not has_open_turn(view.events)
        if trial.first_view is not None:
            # The resumed child kept everything round one committed, unchanged. (Beyond that, a
            # transaction the killed child wrote but never acknowledged may surface later: an
            # SQLite WAL commit whose wal-index update was cut off becomes visible once a later
            # writer recovers the index. Not acknowledged means not committed, so it may go
            # either way.)
            committed = trial.first_committed
            prefix = [e.to_dict() for e in view.events[:committed]]
            assert prefix == trial.first_view[:committed]
        if not repair:
            trial.first_view = [e.to_dict() for e in view.events]
            trial.first_committed = max(trial.committed, default=-1) + 1
            return
        loaded = await backend.load(trial.session_id)
        assert [e.to_dict() for e in loaded.events] == [e.to_dict() for e in view.events]
        assert loaded.repair == view.repair
        again = await backend.inspect(trial.session_id)
        assert not again.repair.changed
        assert again.repair.unmatched_approvals == ()
        decided = {e.data["id"]: e.data for e in loaded.events if e.type == "approval/decided"}
        for approval_id in view.repair.unmatched_approvals:
            assert decided[approval_id] == {
                "id": approval_id,
                "outcome": "unavailable",
                "repaired": True,
            }
    finally:
        await backend.close()


def check_approvals(
    trial: Trial, stored: tuple[Event, ...] | list[Event], unmatched: tuple[str, ...]
) -> None:
    """An unanswered question may only be the very last stored event (killed mid-approval)."""
    asked = [e for e in stored if e.type == "approval/asked"]
    answered = {e.data["id"] for e in stored if e.type == "approval/decided"}
    open_ids = [e.data["id"] for e in asked if e.data["id"] not in answered]
    assert tuple(open_ids) == unmatched
    if unmatched:
        trial.reports.append(f"{trial.session_id}: crash between asked and decided")
        assert len(unmatched) == 1, f"{trial.session_id}: several unanswered approvals"
        assert stored[-1].type == "approval/asked"
        assert stored[-1].data["id"] == unmatched[0]


async def crash_trials(url: str, tmp_path: Path, label: str) -> list[Trial]:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    seeds = random.Random(f"crash-{label}")
    trials = [Trial(f"crash-{label}-{n}", seeds.randrange(1 << 30)) for n in range(TRIALS)]
    gate = asyncio.Semaphore(PARALLEL)

    async def one(trial: Trial) -> None:
        rng = random.Random(trial.seed)
        async with gate:
            # Round one starts from nothing.
            await run_child(script, url, trial, rng)
            await check_log(url, trial, repair=False)
            # Round two resumes: its load repairs what round one left.
            await run_child(script, url, trial, rng)
            await check_log(url, trial, repair=True)

    await asyncio.gather(*(one(trial) for trial in trials))
    return trials


@pytest.mark.timeout(120)
@pytest.mark.parametrize("scheme", ["sqlite", "jsonl"])
async def test_sigkill_at_random_moments_loses_nothing_committed(
    scheme: str, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path}/store.db" if scheme == "sqlite" else f"jsonl://{tmp_path}/logs"
    trials = await crash_trials(url, tmp_path, scheme)
    # Most kills land after real work, or the test would prove little.
    assert sum(1 for trial in trials if len(trial.committed) > 10) >= TRIALS // 2
