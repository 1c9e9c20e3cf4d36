"""``tether run --json`` and ``Harness.stream()`` show only what is committed (issue 15): the
stream of a run is exactly the stored log of every session of it, each child's from seq 0,
and a run killed right after it printed a decision has that decision in its store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from crash_support import (
    approver,
    kill,
    missing_from_store,
    printed,
    start,
    stored_events,
)
from e2e_support import JsonRun, tree

from cli_support import run_args, tether
from tether._harness import Harness
from tether.session import Event, SessionHeader
from tether.session.persistence import JsonlPersistence, StoredSession
from tether.session.persistence._commits import CommitsNotReportedError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "delegation"

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(params=["sqlite", "jsonl"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return f"jsonl://{tmp_path / 'store'}"


def test_the_stream_is_every_sessions_stored_log_from_seq_0(store: str, ws: Path) -> None:
    (ws / "seed.txt").write_text("hello\n")
    run = JsonRun(tether(*run_args(EXAMPLES / "parallel.json", ws, store)))
    assert run.proc.returncode == 0, run.proc.stderr
    assert run.result["type"] == "run/result" and run.result["stop_reason"] == "completed"
    children = [c["id"] for c in tree({"store": store}, run.root)["children"]]
    assert sorted(run.sessions) == sorted([run.root, *children])
    for session, lines in run.sessions.items():
        assert lines == stored_events(store, session), session
        assert [line["seq"] for line in lines] == list(range(len(lines)))
    # A background child's first event, its descriptor, is part of its creation seed.
    firsts = sorted(
        (run.sessions[c][0]["type"], run.sessions[c][0]["data"]["label"]) for c in children
    )
    assert firsts == [("subagent/descriptor", "alpha"), ("subagent/descriptor", "beta")]
    by_label = {run.sessions[c][0]["data"]["label"]: c for c in children}
    assert run.sessions[by_label["alpha"]][0]["data"] == {
        "version": 2,
        "mode": "continuable",
        "provider": "spawn",
        "label": "alpha",
    }
    assert [line["type"] for line in run.sessions[by_label["beta"]][:4]] == [
        "subagent/descriptor",
        "session/end-seed",
        "sandbox/mode",
        "approval/policy",
    ]


async def test_harness_stream_yields_what_each_session_stored(tmp_path: Path, ws: Path) -> None:
    (ws / "seed.txt").write_text("hello\n")
    url = f"sqlite:///{tmp_path / 'api.db'}"
    model = f"scripted:{EXAMPLES / 'parallel.json'}"
    seen: dict[str, list[Event]] = {}
    async with Harness.open(workspace=ws, model=model, store=url) as harness:
        async for item in harness.stream("go"):
            seen.setdefault(item.session_id, []).append(item.event)
        assert harness.root is not None
        root = harness.root.id
        for session, events in seen.items():
            assert tuple(events) == (await harness.store.inspect(session)).events
    assert len(seen) == 3 and root in seen
    assert sorted(events[0].type for events in seen.values()) == [
        "permission/preset",
        "subagent/descriptor",
        "subagent/descriptor",
    ]


@pytest.mark.parametrize("trial", range(3))
def test_killed_right_after_printing_allowed_once_the_store_holds_it(
    store: str, ws: Path, tmp_path: Path, trial: int
) -> None:
    """The issue's probe: kill the run's process group as soon as the stream shows the
    decision; the store must hold it, unchanged, and every line printed before it."""
    model = tmp_path / "model.json"
    model.write_text(
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
                                        "arguments": {"path": f"w{trial}.txt", "content": "w"},
                                    }
                                ]
                            },
                            {"text": "written"},
                        ],
                    }
                ]
            }
        )
    )
    args = run_args(model, ws, store, "--plugin", "ask_tools", "--approver", approver(tmp_path))
    proc = start(args)
    assert proc.stdout is not None
    lines = []
    for raw in proc.stdout:
        lines.append(json.loads(raw))
        if lines[-1]["type"] == "approval/decided":
            break
    out, err = kill(proc)
    lines += printed(out)
    decided = next(line for line in lines if line["type"] == "approval/decided")
    assert decided["data"]["outcome"] == "allowed-once", err
    assert missing_from_store(store, lines) == []
    stored = stored_events(store, decided["session"])
    assert stored is not None
    asked = next(line for line in stored if line["type"] == "approval/asked")
    assert stored[decided["seq"]] == decided
    assert asked["data"]["id"] == decided["data"]["id"] and asked["seq"] < decided["seq"]


class Unreporting:
    """A backend that stores faithfully but cannot say when a batch is committed."""

    def __init__(self, root: Path) -> None:
        self.inner = JsonlPersistence(root)

    async def create(self, header: SessionHeader) -> None:
        await self.inner.create(header)

    async def append(self, session_id: str, events: Any) -> None:
        await self.inner.append(session_id, events)

    async def load(self, session_id: str) -> StoredSession:
        return await self.inner.load(session_id)

    async def inspect(self, session_id: str) -> StoredSession:
        return await self.inner.inspect(session_id)

    async def list(self) -> list[SessionHeader]:
        return await self.inner.list()

    async def close(self) -> None:
        await self.inner.close()

    def __repr__(self) -> str:
        return "<unreporting store>"


async def test_stream_refuses_a_backend_that_cannot_report_commits(
    tmp_path: Path, ws: Path
) -> None:
    backend = Unreporting(tmp_path / "store")
    model = f"scripted:{EXAMPLES / 'parallel.json'}"
    async with Harness.open(workspace=ws, model=model, store=backend) as harness:
        with pytest.raises(CommitsNotReportedError) as caught:
            async for _item in harness.stream("go"):
                raise AssertionError("nothing may be streamed")
        assert harness.root is None  # refused before the run started
    assert caught.value.code == "COMMITS_NOT_REPORTED"
    assert str(caught.value).startswith("the session store <unreporting store> does not report")
    stored = JsonlPersistence(tmp_path / "store")
    try:
        assert await stored.list() == []
    finally:
        await stored.close()


async def test_the_appended_feed_shows_live_appends_without_seeds(tmp_path: Path, ws: Path) -> None:
    """What ``tether chat`` renders: each live append at once, so a child starts at the first
    event after its seed (its descriptor is in the seed)."""
    (ws / "seed.txt").write_text("hello\n")
    url = f"sqlite:///{tmp_path / 'api.db'}"
    model = f"scripted:{EXAMPLES / 'parallel.json'}"
    seen: dict[str, list[Event]] = {}
    async with Harness.open(workspace=ws, model=model, store=url) as harness:
        async for item in harness.stream("go", feed="appended"):
            seen.setdefault(item.session_id, []).append(item.event)
        assert harness.root is not None
        root = harness.root.id
        stored = {sid: (await harness.store.inspect(sid)).events for sid in seen}
    for session, events in seen.items():
        skipped = 0 if session == root else 1  # the seed: its subagent/descriptor
        assert tuple(events) == stored[session][skipped:]
    assert sorted(events[0].type for events in seen.values()) == [
        "permission/preset",
        "session/end-seed",
        "session/end-seed",
    ]
