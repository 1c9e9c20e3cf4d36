"""What an approval cycle costs the store, counted (not timed), and the in-memory store.

One cycle is what the peer comparison measures (``bench/peer_cycle.py``): a prompt, a model
asking for a tool that needs approval, an in-process approver allowing it, the audit pair, the
tool, the model's answer, the run's end. At the default durability it must cost one sync: the
audit pair, with everything before it, made durable in one commit before the tool runs, and
the rest committed without waiting for the disk.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from cli_support import run_args, tether
from script_support import script
from tether import Harness, MemoryPersistence, SqlitePersistence
from tether.kernel import PluginEntry
from tether.model import Completion, ModelRequest, ToolCall
from tether.session import Event, SessionHeader
from tether.session import _store as store_module
from tether.tools import ToolArgs, ToolResult
from tether.tools import ToolCall as Call


class CountingSqlite(SqlitePersistence):
    """The real SQLite backend, recording every commit (durable or not) and every sync of its
    log file as the worker thread makes them."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.writes: list[tuple[str, bool, list[str]]] = []

    def _create(self, header: SessionHeader, first: tuple[Event, ...], *, sync: bool) -> None:
        super()._create(header, first, sync=sync)
        self.writes.append(("create", sync, [e.type for e in first]))

    def _append(self, session_id: str, batch: tuple[Event, ...], *, sync: bool) -> None:
        super()._append(session_id, batch, sync=sync)
        self.writes.append(("append", sync, [e.type for e in batch]))

    def _sync_all(self) -> None:
        if self._unsynced:
            self.writes.append(("sync", True, []))
        super()._sync_all()

    def syncs(self) -> int:
        return sum(1 for _, synced, _ in self.writes if synced)


class DeleteArgs(ToolArgs):
    path: str


class DeleteFile:
    """The gated tool; when it runs, it notes what the store had made durable by then."""

    name = "delete_file"
    description = "Delete a file (pretend)."
    Args = DeleteArgs

    def __init__(self, backend: CountingSqlite | None = None) -> None:
        self.backend = backend
        self.seen: list[list[tuple[str, bool, list[str]]]] = []

    async def run(self, call: Call) -> ToolResult:
        if self.backend is not None:
            self.seen.append(list(self.backend.writes))
        return ToolResult(f"deleted {call.args.path}")  # type: ignore[attr-defined]


class AsksThenAnswers:
    """A model client: a call to ``delete_file``, then "done" once its result is there."""

    async def stream(
        self, request: ModelRequest, signal: object = None
    ) -> AsyncIterator[Completion]:
        if not request.messages or request.messages[-1].role != "tool":
            arguments = '{"path":"/tmp/x"}'
            yield Completion("", tool_calls=(ToolCall("c1", "delete_file", arguments),))
        else:
            yield Completion("done")


async def allow(request: Any) -> str:
    return "allowed-once"


def opened(workspace: Path, store: object) -> Any:
    return Harness.open(
        workspace=workspace,
        model=AsksThenAnswers(),
        store=store,  # type: ignore[arg-type]
        sandbox="workspace-write",
        approval="ask",
        approver=allow,
        plugins=[PluginEntry(name="ask_tools", config={"tools": ["delete_file"]})],
    )


def types(events: Sequence[Event]) -> list[str]:
    return [event.type for event in events]


@asynccontextmanager
async def counted(tmp_path: Path) -> AsyncIterator[tuple[Any, CountingSqlite, DeleteFile]]:
    """A harness on a counting SQLite store, with the gated tool registered."""
    backend = CountingSqlite(tmp_path / "store.db")
    tool = DeleteFile(backend)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with opened(workspace, backend) as harness:
        harness.tools.register(tool)
        yield harness, backend, tool


async def test_one_durable_commit_carries_the_audit_pair(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The write-behind never fires on its own here, as in a cycle faster than its delay, so
    # what each commit holds is fixed.
    monkeypatch.setattr(store_module, "WRITE_BEHIND_DELAY", 3600.0)
    async with counted(tmp_path) as (harness, backend, tool):
        for turn in (1, 2, 3):
            before = len(backend.writes)
            result = await harness.run("please delete /tmp/x")
            assert (result.stop_reason, result.output) == ("completed", "done")
            cycle = backend.writes[before:]
            # One sync: the turn up to and including its audit pair, in one commit...
            durable = [write for write in cycle if write[1]]
            assert len(durable) == 1, cycle
            assert durable[0][2][-2:] == ["approval/asked", "approval/decided"]
            if turn == 1:  # ...which for a new session is its creation, scope first
                assert durable[0][0] == "create"
                assert durable[0][2][:2] == ["sandbox/mode", "approval/policy"]
            # ...made before the tool ran; the rest of the turn is committed at the run's end,
            # without waiting for the disk.
            assert tool.seen[-1][-1] == durable[0]
            assert [(kind, synced) for kind, synced, _ in cycle] == [
                (durable[0][0], True),
                ("append", False),
            ]
            assert cycle[-1][2][0] == "tool/result" and cycle[-1][2][-1] == "turn/end"
    # Closing syncs what was deferred, once.
    assert backend.writes[-1] == ("sync", True, [])
    stored = await SqlitePersistence(tmp_path / "store.db").inspect(result.session_id)
    assert types(stored.events).count("approval/decided") == 3
    assert not stored.repair.changed


async def test_an_approval_costs_one_sync_however_the_write_behind_falls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With the write-behind firing at once, the ask may be committed (deferred) before the
    # answer comes, as it is when a person takes their time: still one sync, and by the time
    # the tool runs both halves of the pair are durable (a sync covers every earlier commit).
    monkeypatch.setattr(store_module, "WRITE_BEHIND_DELAY", 0.0)
    async with counted(tmp_path) as (harness, backend, tool):
        before = len(backend.writes)
        await harness.run("please delete /tmp/x")
        cycle = backend.writes[before:]
        assert sum(1 for _, synced, _ in cycle if synced) == 1, cycle
        at_tool = tool.seen[-1]
        last_sync = max(i for i, (_, synced, _) in enumerate(at_tool) if synced)
        committed = [kind for _, _, kinds in at_tool[: last_sync + 1] for kind in kinds]
        assert committed[-2:] == ["approval/asked", "approval/decided"]


async def test_the_approval_service_works_on_the_memory_store(tmp_path: Path) -> None:
    tool = DeleteFile()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with opened(workspace, "memory://") as harness:
        harness.tools.register(tool)
        assert isinstance(harness.store.persistence, MemoryPersistence)
        assert harness.store.leases is None  # no other process could take its sessions
        result = await harness.run("please delete /tmp/x")
        assert (result.stop_reason, result.output) == ("completed", "done")
        stored = await harness.store.persistence.inspect(result.session_id)
        kinds = types(stored.events)
        assert kinds.index("tool/call") < kinds.index("approval/asked")
        assert kinds.index("approval/asked") < kinds.index("approval/decided")
        assert kinds.index("approval/decided") < kinds.index("tool/result")
        decided = next(e for e in stored.events if e.type == "approval/decided")
        assert decided.data["outcome"] == "allowed-once"
        # Reopening works within the process: the log is the state.
        root = harness.root
        assert root is not None
        await harness.store.dispose(root.session)
        reopened = await harness.store.open(result.session_id)
        assert types(reopened.events) == [*kinds, "session/end-seed"]
        await harness.store.dispose(reopened)
    assert not list(tmp_path.rglob("*.db")) and not list(tmp_path.rglob("*.leases"))


def test_the_command_line_runs_on_the_memory_store_and_refuses_what_needs_a_shared_one(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    model = script(tmp_path / "s.json", [{"text": "hello"}])
    ran = tether(*run_args(model, workspace, "memory://"))
    assert ran.returncode == 0, ran.stderr
    assert '"type": "run/result"' in ran.stdout.splitlines()[-1]
    in_memory = (
        "the memory:// store keeps sessions in the memory of the process that runs them, so no "
        "other process can read, answer or lease them; use a sqlite:// or jsonl:// store for "
        "this"
    )
    for command in (
        ["sessions", "list"],
        ["sessions", "fsck"],
        ["approvals", "list"],
        ["approvals", "answer", "ap-1", "allow"],
    ):
        refused = tether(*command, "--store", "memory://")
        assert refused.returncode == 1, command
        assert refused.stderr == f"tether: STORE_IN_MEMORY: {in_memory}\n", command
    resumed = tether(*run_args(model, workspace, "memory://", "--continue"))
    assert (resumed.returncode, resumed.stderr) == (1, f"tether: STORE_IN_MEMORY: {in_memory}\n")
    described = tether("doctor", "--store", "memory://")
    assert "store: ok: memory:// (0 sessions)" in described.stdout.splitlines()
    waiting = tether(*run_args(model, workspace, "memory://", "--approval-from", "store"))
    assert waiting.returncode != 0
    assert "approval_from_store needs the run's session store to be a sqlite:// or jsonl://" in (
        waiting.stderr
    )
    assert not list(tmp_path.rglob("*.db"))
