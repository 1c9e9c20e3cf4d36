"""The crash harness (issue 15): ``tether run --json`` killed with SIGKILL at random moments.

Each trial runs a real ``tether run --json`` in a fresh workspace and store: a read-only root
(scripted model) escalates three writes, two through the ``write`` tool and one through
``bash`` under the OS sandbox, each answered ``allowed-once`` by an ``--approver`` program, and
starts a background child that runs a sandboxed command and reads a file. The run's whole
process group is killed after a random number of printed lines plus a random delay (or at a
random moment of its start-up). Then:

- every event the stream printed is in the store unchanged (session, seq, type, data), before
  the repair and after it;
- every file in the workspace (a temporary file of an unfinished write included) has its
  ``approval/asked`` / ``approval/decided {allowed-once}`` pair stored, before the call's
  result when that is stored; nothing else changed on disk;
- ``tether sessions fsck --repair`` exits 0, reports every session, and leaves each one
  reading back with nothing to repair;
- ``tether run --resume ROOT`` completes, without re-applying any scope.

Both stores. ``TETHER_CRASH_TRIALS`` sets the trials per store (default 24),
``TETHER_CRASH_SEED`` the seed (default: a fresh one); a failure names both, so it can be
replayed: ``TETHER_CRASH_SEED=S .venv/bin/python -m pytest
'tests/e2e/test_crash_harness.py::test_killed_at_a_random_moment[sqlite-7]'``.
``docs/reliability.md`` records the results.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import secrets
import time
from pathlib import Path

import pytest
from crash_support import (
    Line,
    approver,
    events_printed,
    kill,
    missing_from_store,
    printed,
    start,
)

from cli_support import run_args, tether
from tether.session.persistence import open_persistence

TRIALS = int(os.environ.get("TETHER_CRASH_TRIALS", "24"))
SEED = int(os.environ.get("TETHER_CRASH_SEED") or secrets.randbits(32))
STORES = ("sqlite", "jsonl")
TEMP_FILE = re.compile(r"\.tether-[0-9a-f]{12}\.tmp")
"""The name the write tool gives new content before renaming it over the target."""

ESCALATE = {"sandbox_permissions": "workspace-write"}
MODEL = {
    "agents": [
        {
            "match": {"depth": 0},
            "steps": [
                {
                    "tool_calls": [
                        {
                            "name": "write",
                            "arguments": {
                                "path": "e1.txt",
                                "content": "one",
                                **ESCALATE,
                                "justification": "the task writes e1.txt",
                            },
                        }
                    ]
                },
                {
                    "tool_calls": [
                        {
                            "name": "subagent",
                            "arguments": {"description": "worker", "prompt": "Look around."},
                        }
                    ]
                },
                {
                    "tool_calls": [
                        {
                            "name": "bash",
                            "arguments": {
                                # Commands write below the workspace root, not in it.
                                "command": "echo two > out/e2.txt",
                                "description": "write out/e2.txt",
                                **ESCALATE,
                                "justification": "the task writes out/e2.txt",
                            },
                        }
                    ]
                },
                {
                    "tool_calls": [
                        {
                            "name": "write",
                            "arguments": {
                                "path": "e3.txt",
                                "content": "three",
                                **ESCALATE,
                                "justification": "the task writes e3.txt",
                            },
                        }
                    ]
                },
                {"text": "All three written."},
            ],
        },
        {
            "match": {"depth": 1, "label": "worker"},
            "steps": [
                {"tool_calls": [{"name": "bash", "arguments": {"command": "ls -R"}}]},
                {"tool_calls": [{"name": "read", "arguments": {"path": "e1.txt"}}]},
                {"text": "worker: looked around"},
            ],
        },
    ]
}

pytestmark = pytest.mark.timeout(300)


class Trial:
    def __init__(self, base: Path, store_kind: str) -> None:
        self.base = base
        self.workspace = base / "ws"
        (self.workspace / "out").mkdir(parents=True)
        self.model = base / "model.json"
        self.model.write_text(json.dumps(MODEL))
        self.store = (
            f"sqlite:///{base / 'store.db'}"
            if store_kind == "sqlite"
            else f"jsonl://{base / 'store'}"
        )
        self.approver = approver(base)

    def args(self, resume: str | None = None) -> list[str]:
        """The first run's arguments (a read-only root), or those of resuming ``resume``
        (whose scope its log holds)."""
        extra = ["--resume", resume] if resume else ["--sandbox", "read-only"]
        prompt = "continue" if resume else "do the task"
        return run_args(
            self.model, self.workspace, self.store, "--approver", self.approver, *extra,
            prompt=prompt,
        )  # fmt: skip

    def effects(self) -> list[str]:
        """Every file in the workspace, relative to it."""
        return sorted(
            str(path.relative_to(self.workspace))
            for path in self.workspace.rglob("*")
            if not path.is_dir()
        )


def stored_logs(store: str) -> dict[str, tuple[int, list[Line]]]:
    """Every stored session: its depth and its events (repaired in view only)."""

    async def read() -> dict[str, tuple[int, list[Line]]]:
        persistence = open_persistence(store)
        try:
            logs = {}
            for header in await persistence.list():
                stored = await persistence.inspect(header.id)
                events = [{"seq": e.seq, "type": e.type, "data": e.data} for e in stored.events]
                logs[header.id] = (header.delegation_depth, events)
            return logs
        finally:
            await persistence.close()

    return asyncio.run(read())


def clean(store: str) -> list[str]:
    """The stored sessions that read back whole, with nothing left to repair."""

    async def read() -> list[str]:
        persistence = open_persistence(store)
        try:
            ids = [header.id for header in await persistence.list()]
            return sorted(
                [sid for sid in ids if not (await persistence.inspect(sid)).repair.changed]
            )
        finally:
            await persistence.close()

    return asyncio.run(read())


def approved_before(events: list[Line], call_id: str) -> bool:
    """Whether ``call_id`` has a stored asked/decided ``allowed-once`` pair, both before the
    call's result when that is stored."""
    asked = [e for e in events if e["type"] == "approval/asked" and e["data"]["call_id"] == call_id]
    for ask in asked:
        decided = [
            e
            for e in events
            if e["type"] == "approval/decided" and e["data"]["id"] == ask["data"]["id"]
        ]
        results = [
            e["seq"]
            for e in events
            if e["type"] == "tool/result" and e["data"]["call_id"] == call_id
        ]
        if (
            len(decided) == 1
            and decided[0]["data"]["outcome"] == "allowed-once"
            and ask["seq"] < decided[0]["seq"] < min(results, default=len(events))
        ):
            return True
    return False


def unapproved_effects(trial: Trial, events: list[Line]) -> list[str]:
    """The workspace files no stored, approved call accounts for."""
    calls = []
    for event in events:
        if event["type"] == "tool/call":
            arguments = json.loads(event["data"]["arguments"])
            calls.append((event["data"]["name"], arguments, event["data"]["call_id"]))
    bad = []
    for effect in trial.effects():
        folder, name = os.path.split(effect)
        accounting = [
            call_id
            for tool, arguments, call_id in calls
            if (tool == "write" and arguments["path"] == effect)
            or (tool == "write" and TEMP_FILE.fullmatch(name) and not folder)
            or (tool == "bash" and f"> {effect}" in arguments["command"])
        ]
        if not any(approved_before(events, call_id) for call_id in accounting):
            bad.append(effect)
    return bad


def crash(trial: Trial, rng: random.Random) -> tuple[list[Line], str]:
    """One run killed at a random moment: what it printed, and how the kill was placed."""
    proc = start(trial.args())
    assert proc.stdout is not None
    lines: list[Line] = []
    # The calibrated run prints about 60 lines; a third of the kills fall in start-up.
    after = rng.randrange(-30, 64)
    delay = rng.uniform(0, 0.05)
    if after < 0:
        delay = rng.uniform(0.1, 1.5)
    else:
        while len(lines) < after and (raw := proc.stdout.readline()):
            lines += printed(raw)
    time.sleep(delay)
    out, _err = kill(proc)
    lines += printed(out)
    return lines, f"after {max(after, 0)} lines + {delay * 1000:.0f} ms"


def check(trial: Trial, lines: list[Line], where: str) -> None:
    missing = missing_from_store(trial.store, lines)
    assert missing == [], f"{where}: printed but not stored: {missing}"
    logs = stored_logs(trial.store)
    roots = [sid for sid, (depth, _events) in logs.items() if depth == 0]
    assert len(roots) <= 1, where
    root_events = logs[roots[0]][1] if roots else []
    assert unapproved_effects(trial, root_events) == [], f"{where}: {trial.effects()}"

    repaired = tether("sessions", "fsck", "--repair", "--store", trial.store)
    assert repaired.returncode == 0, f"{where}: {repaired.stdout}{repaired.stderr}"
    *verdicts, _summary = repaired.stdout.splitlines()
    assert len(verdicts) == len(logs), f"{where}: {repaired.stdout}"
    assert clean(trial.store) == sorted(logs), f"{where}: {repaired.stdout}"
    assert missing_from_store(trial.store, lines) == [], f"{where}: changed by the repair"

    if not roots:
        assert events_printed(lines) == [], where  # nothing stored, so nothing shown
        return
    resumed = tether(*trial.args(resume=roots[0]))
    assert resumed.returncode == 0, f"{where}: {resumed.stderr}"
    shown = printed(resumed.stdout.encode())
    assert shown[-1]["type"] == "run/result" and shown[-1]["session"] == roots[0], where
    assert not [
        line
        for line in shown
        if line["session"] == roots[0] and line["type"] in ("sandbox/mode", "approval/policy")
    ], where
    assert missing_from_store(trial.store, shown) == [], where


@pytest.mark.parametrize("store_kind", STORES)
def test_an_uninterrupted_run_is_the_baseline(tmp_path: Path, store_kind: str) -> None:
    """The scenario itself: every guarded call approved and done, the child ran, the stream
    is the store."""
    trial = Trial(tmp_path, store_kind)
    proc = tether(*trial.args())
    assert proc.returncode == 0, proc.stderr
    lines = printed(proc.stdout.encode())
    assert lines[-1]["stop_reason"] == "completed"
    assert trial.effects() == ["e1.txt", "e3.txt", "out/e2.txt"]
    decided = [line["data"]["outcome"] for line in lines if line["type"] == "approval/decided"]
    assert decided == ["allowed-once"] * 3
    assert len({line["session"] for line in events_printed(lines)}) == 2
    check(trial, lines, "uninterrupted")


@pytest.mark.parametrize("trial_index", range(TRIALS))
@pytest.mark.parametrize("store_kind", STORES)
def test_killed_at_a_random_moment(tmp_path: Path, store_kind: str, trial_index: int) -> None:
    rng = random.Random(f"{SEED}:{store_kind}:{trial_index}")
    trial = Trial(tmp_path, store_kind)
    lines, where = crash(trial, rng)
    check(trial, lines, f"TETHER_CRASH_SEED={SEED} {store_kind} trial {trial_index}, {where}")
