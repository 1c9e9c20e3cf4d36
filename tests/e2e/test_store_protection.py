"""The session store out of every agent's reach, through the real ``tether run``: a store inside
the workspace is neither readable by a confined command nor by a file tool, and a store the
sandbox cannot protect is refused before anything runs (exact code, message, exit status)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from cli_support import run_args, tether
from script_support import script
from tether import Harness
from tether._harness import _protect_store
from tether.kernel import PluginEntry
from tether.sandbox import SANDBOX_SERVICE, SandboxError, SandboxProvider
from tether.session._store_files import store_files
from tether.session.persistence import SqlitePersistence
from tether.session.persistence._factory import sqlite_url

TOKEN = "prompt-token-8f3a"
HIDDEN = "it is hidden from every agent (it holds credentials or tether's own state)"

pytestmark = pytest.mark.timeout(120)


def run(workspace: Path, store: str, steps: list[dict[str, Any]], model: Path) -> Any:
    script(model, steps)
    return tether(
        *run_args(
            model, workspace, store, "--sandbox", "workspace-write", prompt=f"do the task {TOKEN}"
        )
    )


@pytest.mark.bwrap
def test_a_store_inside_the_workspace_is_out_of_reach(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "state").mkdir(parents=True)
    db = workspace / "state" / "tether.db"
    store = sqlite_url(db)
    steps = [
        {"tool_calls": [{"name": "bash", "arguments": {
            "command": "cat state/tether.db state/tether.db-wal; ls -A state; "
            "echo '{\"outcome\": \"allowed-once\"}' > state/tether.db.answers/x.json",
        }}]},
        {"tool_calls": [{"name": "read", "arguments": {"path": "state/tether.db-wal"}}]},
        {"tool_calls": [{"name": "grep", "arguments": {"pattern": TOKEN}}]},
        {"text": "done"},
    ]  # fmt: skip
    proc = run(workspace, store, steps, tmp_path / "model.json")
    assert proc.returncode == 0, proc.stderr
    results = [
        line["data"]
        for line in map(json.loads, proc.stdout.splitlines())
        if line.get("type") == "tool/result"
    ]
    bash, read, grep = (r["content"] for r in results)
    assert TOKEN not in bash and "allowed-once" not in bash.split("\n[stderr]")[0]
    assert "[sandbox: file access denied under workspace-write mode]" in bash
    assert read == (
        f"Error: cannot read state/tether.db-wal: {HIDDEN} "
        "[sandbox: file access denied under workspace-write mode]"
    )
    assert grep == f"no matches for {TOKEN}"
    assert os.listdir(f"{db}.answers") == []  # created empty at start, written by nobody


def test_a_workspace_inside_the_store_is_refused_before_anything_runs(tmp_path: Path) -> None:
    store_dir = tmp_path / "sessions"
    workspace = store_dir / "ws"
    workspace.mkdir(parents=True)
    steps = [{"tool_calls": [{"name": "write", "arguments": {"path": "x", "content": "x"}}]}]
    proc = run(workspace, "jsonl://" + quote(str(store_dir)), steps, tmp_path / "model.json")
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr == (
        f"tether: STORE_UNPROTECTED: the workspace {workspace} lies inside the session store's "
        f"{store_dir}, which every command and file tool must not see; use a workspace outside "
        "the store, or keep the store elsewhere (--store sqlite:////ABS/PATH.db)\n"
    )
    assert os.listdir(workspace) == []


def model(tmp_path: Path) -> str:
    path = tmp_path / "model.json"
    path.write_text(json.dumps({"agents": [{"match": {"depth": 0}, "steps": [{"text": "ok"}]}]}))
    return f"scripted:{path}"


async def test_the_harness_hides_its_own_store_from_the_composed_sandbox(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    db = workspace / "t.db"
    url = sqlite_url(db)
    async with Harness.open(workspace=workspace, model=model(tmp_path), store=url) as harness:
        sandbox = harness.ctx.get(SANDBOX_SERVICE)
        assert isinstance(sandbox, SandboxProvider)
        assert sandbox.path_rules().store == tuple(str(p) for p in store_files(url))
        assert os.listdir(f"{db}.answers") == []  # exists before any command runs


@pytest.mark.bwrap
async def test_a_store_in_an_open_workspace_root_is_refused_at_start(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    url = sqlite_url(workspace / "t.db")
    with pytest.raises(SandboxError) as err:
        async with Harness.open(
            workspace=workspace,
            model=model(tmp_path),
            store=url,
            plugins=[PluginEntry(name="sandbox", config={"open_workspace_root": True})],
        ):
            pass
    assert err.value.code == "STORE_UNPROTECTED"
    assert str(err.value).startswith(
        f"session store files lie directly in the workspace root {workspace} and "
        "open_workspace_root is on"
    )


async def test_a_sandbox_service_that_is_not_tethers_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SandboxError) as err:
        await _protect_store(object(), SqlitePersistence(tmp_path / "t.db"), str(tmp_path))
    assert err.value.code == "STORE_UNPROTECTED"
    assert str(err.value) == (
        "the composed sandbox service is not tether's, so the session store's files cannot be "
        "hidden from commands and file tools; compose the sandbox plugin"
    )
