"""Answering approvals from another terminal: ``tether run --approval-from store`` waits, and
``tether approvals list`` / ``answer`` from a second process decide."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

TETHER = str(Path(sys.executable).parent / "tether")
pytestmark = pytest.mark.timeout(120)


def tether(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TETHER, *args], capture_output=True, text=True, timeout=60, check=False)


def wait_for_pending(store: str, deadline: float) -> list[dict[str, object]]:
    while time.monotonic() < deadline:
        listed = tether("approvals", "list", "--store", store, "--json")
        assert listed.returncode == 0, listed.stderr
        rows = json.loads(listed.stdout)
        if rows:
            return rows  # type: ignore[no-any-return]
        time.sleep(0.2)
    raise AssertionError("no approval became pending")


@pytest.mark.parametrize(("decision", "written"), [("allow", True), ("reject", False)])
def test_answer_from_another_process(tmp_path: Path, decision: str, written: bool) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = tmp_path / "s.json"
    script.write_text(
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
                                        "arguments": {"path": "a.txt", "content": "a"},
                                    }
                                ]
                            },
                            {"text": "finished"},
                        ],
                    }
                ]
            }
        )
    )
    store = f"sqlite:///{tmp_path / 's.db'}"
    run = subprocess.Popen(
        [
            TETHER,
            "run",
            "--model",
            f"scripted:{script}",
            "--workspace",
            str(workspace),
            "--store",
            store,
            "--plugin",
            "ask_tools",
            "--approval-from",
            "store",
            "--json",
            "go",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        [row] = wait_for_pending(store, time.monotonic() + 30)
        assert row["tool_name"] == "write" and row["delegation_depth"] == 0
        assert row["headline"] == 'run "write": a.txt'
        text = tether("approvals", "list", "--store", store)
        assert str(row["id"]) in text.stdout and "write" in text.stdout
        answered = tether("approvals", "answer", str(row["id"]), decision, "--store", store)
        assert answered.returncode == 0, answered.stderr
        again = tether("approvals", "answer", str(row["id"]), decision, "--store", store)
        assert again.returncode == 1
        assert "APPROVAL_ALREADY_ANSWERED" in again.stderr or "APPROVAL_NOT_PENDING" in again.stderr
        out, err = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    decided = next(e for e in events if e["type"] == "approval/decided")
    assert decided["data"]["outcome"] == ("allowed-once" if written else "rejected")
    assert decided["data"]["answered_by"].startswith("tether approvals answer (")
    assert (workspace / "a.txt").exists() is written
    assert tether("approvals", "list", "--store", store, "--json").stdout.strip() == "[]"


def test_unknown_or_stale_ids_are_refused(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 's.db'}"
    result = tether("approvals", "answer", "no-such-id", "allow", "--store", store)
    assert result.returncode == 1
    assert result.stderr.startswith(
        "tether: APPROVAL_NOT_PENDING: approval no-such-id is not pending"
    )
    bad = tether("approvals", "answer", "x", "maybe", "--store", store)
    assert bad.returncode == 2
