"""Grants and rules from the command line, end to end: an ``--approver`` that grants for the
session (the second identical call runs without a second ask, audited ``decided_by: grant``),
an ``allowed-always`` rule that a later run is decided by, ``tether grants list|revoke``,
``tether approvals answer ID allow-session``, and a ``.claude/settings.json`` whose
``permissions`` apply once trusted (and are ignored, with a warning, while not)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from e2e_support import JsonRun, stored, write_user_config

from cli_support import ASK_EVERY_CALL, TETHER, run_args, tether
from script_support import call, script
from tether.policy._rule_store import RuleStore

pytestmark = [pytest.mark.timeout(120), pytest.mark.bwrap]


def approver(tmp_path: Path, answer: dict[str, Any] | str) -> tuple[str, Path]:
    """An approver program outside the workspace that logs each request and gives ``answer``."""
    log = tmp_path / "asked.jsonl"
    program = tmp_path / "approve.py"
    reply = answer if isinstance(answer, str) else json.dumps(answer)
    program.write_text(
        f"import sys\nopen({str(log)!r}, 'a').write(sys.stdin.read())\nprint({reply!r})\n"
    )
    return f"{sys.executable} {program}", log


def requests(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return ws


def run(tmp_path: Path, steps: list[dict[str, Any]], *extra: str, name: str = "s.json") -> JsonRun:
    model = script(tmp_path / name, steps)
    done = tether(
        *run_args(
            model,
            workspace(tmp_path),
            f"sqlite:///{tmp_path / 's.db'}",
            *ASK_EVERY_CALL,
            *extra,
        )
    )
    assert done.returncode == 0, done.stderr
    return JsonRun(done)


def audit(result: JsonRun) -> list[tuple[str, dict[str, Any]]]:
    return [
        (t, d)
        for t, d in result.audit(result.root)
        if t in ("approval/asked", "approval/decided", "tool/result")
    ] + [
        (e["type"], e["data"])
        for e in result.sessions[result.root]
        if e["type"] == "approval/grant"
    ]


def test_an_approver_grants_for_the_session_and_the_second_call_is_not_asked(
    tmp_path: Path,
) -> None:
    command, log = approver(
        tmp_path, {"outcome": "allowed-for-session", "scope": {"kind": "prefix"}}
    )
    result = run(
        tmp_path,
        [call("bash", command="echo hello one"), call("bash", command="echo hello two"),
         call("bash", command="echo bye"), {"text": "done"}],
        "--approver",
        command,
    )  # fmt: skip
    [first, third] = requests(log)  # "echo hello two" was decided by the grant
    assert first["label"] is None and first["outcomes"] == [
        "allowed-once", "allowed-for-session", "allowed-always", "rejected"
    ]  # fmt: skip
    assert first["scopes"] == [
        {"kind": "exact", "rule": "Bash(echo hello one)"},
        {"kind": "prefix", "rule": "Bash(echo hello:*)"},
        {"kind": "prefix", "rule": "Bash(echo:*)"},
        {"kind": "tool", "rule": "Bash"},
    ]
    assert third["action"] == {"tool": "bash", "command": "echo bye"}
    events = result.sessions[result.root]
    approvals = [
        (e["type"], e["data"])
        for e in events
        if e["type"].startswith("approval/") and e["type"] != "approval/policy"
    ]
    asked = [d["id"] for t, d in approvals if t == "approval/asked"]
    grant_id = next(d["id"] for t, d in approvals if t == "approval/grant")
    scope = {"kind": "prefix", "rule": "Bash(echo hello:*)"}
    assert approvals[:6] == [
        ("approval/asked", {"id": asked[0], "tool_name": "bash", "call_id": approvals[0][1]["call_id"],
                            "reason": 'run "bash": echo hello one',
                            "action": {"tool": "bash", "command": "echo hello one"}}),
        ("approval/decided", {"id": asked[0], "outcome": "allowed-for-session", "scope": scope}),
        ("approval/grant", {"id": grant_id, "approval_id": asked[0], "outcome": "allowed-for-session",
                            "scope": scope}),
        ("approval/asked", {"id": asked[1], "tool_name": "bash", "call_id": approvals[3][1]["call_id"],
                            "reason": 'run "bash": echo hello two',
                            "action": {"tool": "bash", "command": "echo hello two"}}),
        ("approval/decided", {"id": asked[1], "outcome": "allowed-once", "decided_by": "grant",
                              "grant": grant_id, "scope": scope}),
        ("approval/asked", {"id": asked[2], "tool_name": "bash", "call_id": approvals[5][1]["call_id"],
                            "reason": 'run "bash": echo bye',
                            "action": {"tool": "bash", "command": "echo bye"}}),
    ]  # fmt: skip
    outputs = [
        d["content"] for t, d in ((e["type"], e["data"]) for e in events) if t == "tool/result"
    ]
    assert outputs == ["hello one", "hello two", "bye"]


def test_a_scope_the_approver_makes_up_is_refused(tmp_path: Path) -> None:
    command, log = approver(
        tmp_path, {"outcome": "allowed-for-session", "scope": {"kind": "tool", "rule": "Write"}}
    )
    result = run(
        tmp_path, [call("bash", command="echo x"), {"text": "done"}], "--approver", command
    )
    decided = result.of_type(result.root, "approval/decided")
    assert decided == [
        {
            "id": decided[0]["id"],
            "outcome": "unavailable",
            "failure": {
                "kind": "scope-not-offered",
                "excerpt": "scope {'kind': 'tool', 'rule': 'Write'} is not one of the offered "
                "Bash(echo x), Bash(echo x:*), Bash(echo:*), Bash",
            },
        }
    ]
    assert result.of_type(result.root, "approval/grant") == []
    assert len(requests(log)) == 1


def test_allowed_always_decides_later_runs_until_revoked(tmp_path: Path) -> None:
    command, log = approver(tmp_path, {"outcome": "allowed-always", "scope": {"kind": "prefix"}})
    steps = [call("bash", command="echo hello again"), {"text": "done"}]
    first = run(tmp_path, steps, "--approver", command)
    assert first.of_type(first.root, "approval/decided")[0]["outcome"] == "allowed-always"
    ws = workspace(tmp_path).resolve()
    [rule] = RuleStore.for_user().get(str(ws)).rules
    assert rule.rule == "Bash(echo hello:*)"
    # a new run (a new session) is decided by the rule: the approver is not run
    second = run(tmp_path, steps, "--approver", command, name="s2.json")
    assert len(requests(log)) == 1
    decided = second.of_type(second.root, "approval/decided")[0]
    assert (decided["outcome"], decided["decided_by"], decided["rule"]["origin"]) == (
        "allowed-once", "rule", "always"
    )  # fmt: skip
    listed = tether("grants", "list", "--workspace", str(ws), "--store", f"sqlite:///{tmp_path / 's.db'}", "--json")  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [(r["kind"], r["rule"], r["id"]) for r in rows] == [
        ("always", "Bash(echo hello:*)", rule.id)
    ]
    revoked = tether("grants", "revoke", rule.id[:8], "--workspace", str(ws))
    assert revoked.returncode == 0, revoked.stderr
    assert revoked.stdout.startswith(f"revoked always grant {rule.id}: Bash(echo hello:*) (")
    run(tmp_path, steps, "--approver", command, name="s3.json")
    assert len(requests(log)) == 2  # asked again


def test_a_session_grant_is_listed_and_revoked_and_the_resumed_session_asks_again(
    tmp_path: Path,
) -> None:
    command, log = approver(tmp_path, "allowed-for-session")
    first = run(
        tmp_path, [call("bash", command="echo one"), {"text": "done"}], "--approver", command
    )
    store = f"sqlite:///{tmp_path / 's.db'}"
    ws = str(workspace(tmp_path))
    listed = tether("grants", "list", "--workspace", ws, "--store", store)
    assert listed.returncode == 0, listed.stderr
    grant = first.of_type(first.root, "approval/grant")[0]
    head, row = listed.stdout.splitlines()
    assert head.split() == ["ID", "KIND", "DECISION", "RULE", "ESCALATE", "FROM", "SINCE", "BY"]
    assert row.split()[:5] == [grant["id"], "session", "allow", "Bash(echo", "one)"]
    revoked = tether("grants", "revoke", grant["id"][:6], "--workspace", ws, "--store", store)
    assert revoked.returncode == 0, revoked.stderr
    assert revoked.stdout == (
        f"revoked session grant {grant['id']}: Bash(echo one) (session {first.root})\n"
    )
    events = stored({"store": store}, first.root)
    assert events[-1]["type"] == "approval/grant-revoked"
    assert events[-1]["data"]["id"] == grant["id"]
    assert events[-1]["data"]["by"].startswith("tether grants revoke")
    again = tether("grants", "revoke", grant["id"], "--workspace", ws, "--store", store)
    assert again.returncode == 1 and "GRANT_NOT_FOUND" in again.stderr
    # resumed: the revoked grant no longer decides
    # the script continues after the replies the log holds (two)
    steps = [call("bash", command="echo one"), {"text": "done"}]
    model = script(tmp_path / "r.json", steps + steps)
    resumed = tether(*run_args(model, Path(ws), store, "--resume", first.root, "--approver", command, "--plugin", "ask_tools"))  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert len(requests(log)) == 2


def waiting_run(
    tmp_path: Path, steps: list[dict[str, Any]], *extra: str
) -> tuple[subprocess.Popen[str], str, str]:
    """A run with ``--approval-from store`` whose one question waits: the process, the store
    and the question's approval id."""
    model = script(tmp_path / "s.json", steps)
    store = f"sqlite:///{tmp_path / 's.db'}"
    proc = subprocess.Popen(
        [TETHER, *run_args(model, workspace(tmp_path), store, *extra, "--approval-from", "store")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    deadline = time.monotonic() + 30
    rows: list[dict[str, Any]] = []
    while not rows and time.monotonic() < deadline and proc.poll() is None:
        listed = tether("approvals", "list", "--store", store, "--json")
        rows = json.loads(listed.stdout) if listed.returncode == 0 else []
        time.sleep(0.2)
    if len(rows) != 1:
        proc.kill()
        raise AssertionError(f"expected one waiting question, got {rows}: {proc.communicate()}")
    return proc, store, str(rows[0]["id"])


def test_approvals_answer_allow_session_grants_the_narrowest_scope(tmp_path: Path) -> None:
    steps = [call("bash", command="echo a b"), call("bash", command="echo a b"), {"text": "done"}]
    proc, store, approval_id = waiting_run(tmp_path, steps, "--plugin", "ask_tools")
    try:
        answered = tether("approvals", "answer", approval_id, "allow-session", "--store", store)
        assert answered.returncode == 0, answered.stderr
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    result = JsonRun(subprocess.CompletedProcess(proc.args, 0, out, err))
    decided = result.of_type(result.root, "approval/decided")
    assert [d["outcome"] for d in decided] == ["allowed-for-session", "allowed-once"]
    assert decided[0]["scope"] == {"kind": "exact", "rule": "Bash(echo a b)"}
    assert decided[1]["decided_by"] == "grant"


def test_approvals_answer_that_grants_where_nothing_is_offered_is_refused(tmp_path: Path) -> None:
    # an ask rule's question offers no grant: allow-session is refused, the question still waits
    write_user_config('[permissions]\nask = ["Bash(echo secret:*)"]\n')
    steps = [call("bash", command="echo secret x"), {"text": "done"}]
    proc, store, approval_id = waiting_run(tmp_path, steps)
    try:
        granted = tether("approvals", "answer", approval_id, "allow-session", "--store", store)
        assert granted.returncode == 1
        assert granted.stderr == (
            f"tether: APPROVAL_ANSWER_REFUSED: the run waiting for approval {approval_id} "
            "refused this answer: this question offers no allowed-for-session (it takes "
            "allowed-once, rejected); it still waits: answer it with allow|reject\n"
        )
        allowed = tether("approvals", "answer", approval_id, "allow", "--store", store)
        assert allowed.returncode == 0, allowed.stderr
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    # the hint offered only what the question takes
    assert f"tether approvals answer {approval_id} allow|reject --store {store} " in err
    result = JsonRun(subprocess.CompletedProcess(proc.args, 0, out, err))
    refused = result.of_type(result.root, "approval/answer-refused")
    assert [(r["reason"], r["detail"]) for r in refused] == [
        (
            "malformed",
            "this question offers no allowed-for-session (it takes allowed-once, rejected)",
        )
    ]
    [decided] = result.of_type(result.root, "approval/decided")
    assert decided["outcome"] == "allowed-once" and "scope" not in decided
    assert result.of_type(result.root, "approval/grant") == []
    [ran] = result.of_type(result.root, "tool/result")
    assert ran["content"] == "secret x"


def claude_settings(tmp_path: Path) -> Path:
    ws = workspace(tmp_path)
    (ws / ".claude").mkdir()
    (ws / ".claude" / "settings.json").write_text(
        json.dumps({"permissions": {"deny": ["Bash(touch:*)"]}})
    )
    (ws / "out").mkdir()
    return ws


def test_claude_settings_permissions_apply_once_trusted(tmp_path: Path) -> None:
    ws = claude_settings(tmp_path)
    steps = [call("bash", command="touch out/marker"), {"text": "done"}]
    model = script(tmp_path / "s.json", steps)
    store = f"sqlite:///{tmp_path / 's.db'}"
    untrusted = tether(*run_args(model, ws, store, "--sandbox", "workspace-write"))
    assert untrusted.returncode == 0, untrusted.stderr
    assert (
        "tether: warning: .claude/settings.json has permissions rules (deny: 1) that are not "
        f"applied: its content is not trusted; review and trust it with: tether trust "
        f"--workspace {ws.resolve()}"
    ) in untrusted.stderr.splitlines()
    assert (ws / "out" / "marker").exists()  # ignored while untrusted
    (ws / "out" / "marker").unlink()
    trusted = tether("trust", "--workspace", str(ws))
    assert trusted.returncode == 0, trusted.stderr
    done = tether(*run_args(model, ws, store, "--sandbox", "workspace-write"))
    assert done.returncode == 0, done.stderr
    assert "tether: warning" not in done.stderr
    result = JsonRun(done)
    [denied] = result.of_type(result.root, "tool/result")
    assert denied["content"] == (
        'Error: tool "bash" is refused by the deny rule "Bash(touch:*)" (from '
        ".claude/settings.json)"
    )
    assert not (ws / "out" / "marker").exists()
    decided = result.of_type(result.root, "approval/decided")[0]
    assert decided["rule"] == {
        "decision": "deny", "rule": "Bash(touch:*)", "origin": "claude-settings",
        "file": ".claude/settings.json",
    }  # fmt: skip


def test_a_workspace_allow_never_widens_a_users_deny(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    (ws / "tether.toml").write_text('[permissions]\nallow = ["Bash"]\n')
    write_user_config('[permissions]\ndeny = ["Bash(touch:*)"]\n')
    (ws / "out").mkdir()
    assert tether("trust", "--workspace", str(ws)).returncode == 0
    command, log = approver(tmp_path, "rejected")
    result = run(
        tmp_path,
        [call("bash", command="touch out/x"), call("bash", command="echo ok"), {"text": "done"}],
        "--approver",
        command,
    )
    contents = [d["content"] for d in result.of_type(result.root, "tool/result")]
    assert contents[0].startswith('Error: tool "bash" is refused by the deny rule "Bash(touch:*)"')
    assert contents[1] == "ok"  # the workspace's allow skipped the ask_tools question
    assert requests(log) == [] and not (ws / "out" / "x").exists()


def test_an_escalate_rule_allows_that_escalation_and_no_wider(tmp_path: Path) -> None:
    write_user_config('[permissions.escalate]\nworkspace-write = ["Bash(touch out/x)"]\n')
    ws = workspace(tmp_path)
    (ws / "out").mkdir()
    command, log = approver(tmp_path, "rejected")

    def escalate(cmd: str, mode: str) -> dict[str, Any]:
        return call("bash", command=cmd, sandbox_permissions=mode, justification="needed")

    model = script(
        tmp_path / "s.json",
        [escalate("touch out/x", "workspace-write"), escalate("touch out/x", "danger-full-access"),
         call("bash", command="touch out/y"), {"text": "done"}],
    )  # fmt: skip
    done = tether(
        *run_args(model, ws, f"sqlite:///{tmp_path / 's.db'}", "--sandbox", "read-only",
                  "--approval", "ask", "--approver", command)
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = JsonRun(done)
    decided = result.of_type(result.root, "approval/decided")
    assert [(d["outcome"], d.get("decided_by")) for d in decided] == [
        ("allowed-once", "rule"),
        ("rejected", None),
    ]
    assert decided[0]["rule"]["escalate"] == "workspace-write"
    assert (ws / "out" / "x").exists()
    assert not (ws / "out" / "y").exists()  # without the escalation it runs read-only
    assert [r["action"].get("sandbox_permissions") for r in requests(log)] == ["danger-full-access"]


def test_an_ask_rule_asks_where_nothing_else_would_and_doctor_counts(tmp_path: Path) -> None:
    write_user_config('[permissions]\nask = ["Bash(echo secret:*)"]\ndeny = ["Read(.env)"]\n')
    command, log = approver(tmp_path, "allowed-for-session")
    ws = workspace(tmp_path)
    store = f"sqlite:///{tmp_path / 's.db'}"
    model = script(
        tmp_path / "s.json",
        [call("bash", command="echo plain"), call("bash", command="echo secret x"),
         {"text": "done"}],
    )  # fmt: skip
    # no ask_tools: only the ask rule makes anything ask
    done = tether(*run_args(model, ws, store, "--approver", command))
    assert done.returncode == 0, done.stderr
    result = JsonRun(done)
    [asked] = result.of_type(result.root, "approval/asked")
    assert asked["reason"].startswith('ask rule "Bash(echo secret:*)" (from ')
    [request] = requests(log)
    # an ask rule's question offers no grant: the answer that grants anyway is refused
    assert request["outcomes"] == ["allowed-once", "rejected"] and request["scopes"] == []
    decided = result.of_type(result.root, "approval/decided")[0]
    assert decided["failure"]["kind"] == "scope-not-offered"
    contents = [d["content"] for d in result.of_type(result.root, "tool/result")]
    assert contents[0] == "plain" and contents[1].startswith('Error: tool "bash" requires')
    doctor = tether("doctor", "--workspace", str(ws), "--store", store)
    assert doctor.returncode == 0, doctor.stderr
    lines = [
        line for line in doctor.stdout.splitlines() if line.startswith(("permissions", "grants"))
    ]
    assert lines[0].startswith("permissions: ok: 2 rules (deny 1, ask 1, allow 0) from ")
    assert lines[1] == (
        f"grants: 0 session grants in the newest session of this workspace ({result.root}); "
        "tether grants list shows them"
    )
