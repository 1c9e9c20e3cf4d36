"""Answering approvals from another terminal: ``tether run --approval-from store`` waits, and
``tether approvals list`` / ``answer`` from a second process decide."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import time
from pathlib import Path

import pytest

from answer_support import start_waiter
from cli_support import TETHER, tether
from tether.session._answer_box import AnswerBox

USER = pwd.getpwuid(os.getuid()).pw_name

pytestmark = pytest.mark.timeout(120)


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
        assert row["waiting"] is True
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
    # the stored log holds the audit pair, the decision naming who answered
    shown = json.loads(
        tether("sessions", "show", str(row["session"]), "--store", store, "--json").stdout
    )
    pair = [e for e in shown["events"] if e["type"].startswith("approval/")]
    assert [e["type"] for e in pair][-2:] == ["approval/asked", "approval/decided"]
    assert pair[-1]["data"]["id"] == row["id"] and "answered_by" in pair[-1]["data"]


async def test_unknown_or_stale_ids_are_refused(tmp_path: Path) -> None:
    from tether.session import SessionMeta, SessionStore
    from tether.session.persistence import open_persistence

    store = f"sqlite:///{tmp_path / 's.db'}"
    missing = tether("approvals", "answer", "no-such-id", "allow", "--store", store)
    assert missing.returncode == 1
    assert missing.stderr.startswith("tether: STORE_NOT_FOUND: no session store at ")
    assert not (tmp_path / "s.db").exists()
    sessions = SessionStore(open_persistence(store))
    sessions.create(meta=SessionMeta(cwd=str(tmp_path))).append("turn/start", {"turn": 1})
    await sessions.close()
    result = tether("approvals", "answer", "no-such-id", "allow", "--store", store)
    assert result.returncode == 1
    assert result.stderr.startswith(
        "tether: APPROVAL_NOT_PENDING: approval no-such-id is not pending"
    )
    bad = tether("approvals", "answer", "x", "maybe", "--store", store)
    assert bad.returncode == 2


async def test_an_orphaned_approval_is_listed_as_unanswerable_and_refused(tmp_path: Path) -> None:
    from tether.session import SessionMeta, SessionStore
    from tether.session.persistence import open_persistence

    store_url = f"sqlite:///{tmp_path / 's.db'}"
    store = SessionStore(open_persistence(store_url))
    session = store.create(meta=SessionMeta(cwd=str(tmp_path)))
    session.append("turn/start", {"turn": 1})
    session.append("approval/asked", {"id": "orphan-1", "tool_name": "write"})
    await store.close()  # the asking process is gone; nothing waits for an answer
    rows = json.loads(tether("approvals", "list", "--store", store_url, "--json").stdout)
    assert [(r["id"], r["waiting"]) for r in rows] == [("orphan-1", False)]
    listed = tether("approvals", "list", "--store", store_url)
    assert "no (nobody waits on the store)" in listed.stdout
    refused = tether("approvals", "answer", "orphan-1", "allow", "--store", store_url)
    assert refused.returncode == 1
    assert refused.stderr.startswith(
        "tether: APPROVAL_STALE: approval orphan-1 is pending in the log"
    )


def test_an_answer_is_found_in_the_answer_boxs_index_and_reads_no_session(
    tmp_path: Path,
) -> None:
    """``approvals answer`` finds what it answers among the answer box's wait markers (a
    unique prefix of a waiting id names it) and never reads the store: here the store cannot
    be read at all, and the answers still arrive. The store is read only when nothing waits
    under the id, to say why."""
    db = tmp_path / "s.db"
    db.write_bytes(b"not a database " * 100)
    store = f"sqlite:///{db}"
    box = AnswerBox.for_store(store)
    waiters = {approval_id: start_waiter(box, approval_id) for approval_id in ("feed-1", "feed-2")}
    try:
        ambiguous = tether("approvals", "answer", "fee", "allow", "--store", store)
        assert (ambiguous.returncode, ambiguous.stderr) == (
            1,
            "tether: AMBIGUOUS_ID: approval id prefix 'fee' matches 2 approvals: feed-1, "
            "feed-2; give more of the id\n",
        )
        rejected = tether("approvals", "answer", "feed-2", "reject", "--store", store)
        allowed = tether("approvals", "answer", "fee", "allow", "--store", store)  # now unique
        outputs = {i: waiter.communicate(timeout=30)[0] for i, waiter in waiters.items()}
    finally:
        for waiter in waiters.values():
            waiter.kill()
    for answered, approval_id, outcome in (
        (rejected, "feed-2", "rejected"),
        (allowed, "feed-1", "allowed-once"),
    ):
        assert answered.returncode == 0, answered.stderr
        by = json.loads(outputs[approval_id])["answer"]
        assert by == [outcome, f"tether approvals answer ({USER}, pid {by[1].split()[-1]}"]
        assert answered.stdout == f"{approval_id}: {outcome} (recorded as answered by {by[1]})\n"
    late = tether("approvals", "answer", "feed-1", "reject", "--store", store)
    assert late.stderr == (
        "tether: APPROVAL_ALREADY_ANSWERED: approval feed-1 was already answered "
        f"(allowed-once, by {json.loads(outputs['feed-1'])['answer'][1]}): this answer came "
        "too late\n"
    )
    # nothing waits under this id: the store is read to say why, and it cannot be
    unknown = tether("approvals", "answer", "zzz", "allow", "--store", store)
    assert (unknown.returncode, unknown.stderr.split(" is damaged")[0]) == (
        1,
        f"tether: STORE_DAMAGED: SQLite store {db}",
    )
