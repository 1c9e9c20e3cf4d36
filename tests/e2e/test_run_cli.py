"""``tether run`` end to end: the real console script in a subprocess, the scripted model, a
real SQLite store, real files, and a real ``--approver`` program."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cli_support import TETHER, run_args, tether
from script_support import script
from script_support import write as write_call

pytestmark = pytest.mark.timeout(120)


def run_json(
    env: dict[str, Any], steps: list[dict[str, Any]], *extra: str
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    model = script(env["tmp"] / "script.json", steps)
    proc = tether(*run_args(model, env["workspace"], env["store"], *extra))
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    return proc, lines


def approver(tmp: Path, answer: str) -> str:
    marker = tmp / "approver-called.jsonl"
    program = tmp / "approver.py"
    program.write_text(
        "import json, sys\n"
        "request = json.loads(sys.stdin.read())\n"
        f"open({str(marker)!r}, 'a').write(json.dumps(request) + '\\n')\n"
        f"print({answer!r})\n"
    )
    return f"{sys.executable} {program}"


def types_of(lines: list[dict[str, Any]]) -> list[str]:
    return [line["type"] for line in lines]


def test_json_stream_shows_the_run_layout_and_writes_the_file(env: dict[str, Any]) -> None:
    proc, lines = run_json(env, [write_call("out.txt", "hello"), {"text": "All done."}])
    assert proc.returncode == 0, proc.stderr
    assert (env["workspace"] / "out.txt").read_text() == "hello"
    assert lines[-1]["type"] == "run/result"
    assert lines[-1]["stop_reason"] == "completed" and lines[-1]["output"] == "All done."
    events = lines[:-1]
    assert {line["session"] for line in events} == {lines[-1]["session"]}
    assert [line["seq"] for line in events] == list(range(len(events)))
    assert types_of(events) == [
        "permission/preset",
        "sandbox/mode",
        "approval/policy",
        "session/model",
        "agent/inbox/spliced",
        "turn/start",
        "step/start",
        "user/message",
        "user/message",
        "request/header",
        "assistant/message",
        "tool/call",
        "tool/result",
        "step/end",
        "step/start",
        "assistant/message",
        "step/end",
        "turn/end",
    ]
    # a fresh root is pinned to the default preset's three facts (``policy/_presets.py``)
    assert events[0]["data"] == {"preset": "workspace-write"}
    assert events[1]["data"] == {"mode": "workspace-write"}
    assert events[2]["data"] == {"policy": "ask"}
    # the model named on the command line, for a resume to reuse (``_model_choice.py``)
    assert events[3]["data"] == {"model": f"scripted:{env['tmp'] / 'script.json'}"}
    assert events[8]["data"]["source"]["form"] == "snapshot"
    assert events[12]["data"]["is_error"] is False


def test_ask_answered_allowed_once_by_approver_runs_after_the_audit_pair(
    env: dict[str, Any],
) -> None:
    proc, lines = run_json(
        env,
        [write_call("approved.txt", "yes"), {"text": "ok"}],
        "--plugin",
        "ask_tools",
        "--approver",
        approver(env["tmp"], "allowed-once"),
    )
    assert proc.returncode == 0, proc.stderr
    assert (env["workspace"] / "approved.txt").read_text() == "yes"
    kinds = types_of(lines)
    asked, decided, result = (
        kinds.index("approval/asked"),
        kinds.index("approval/decided"),
        kinds.index("tool/result"),
    )
    assert kinds.index("tool/call") < asked < decided < result
    assert lines[asked]["data"]["tool_name"] == "write"
    assert lines[asked]["data"]["reason"] == 'run "write": approved.txt'
    assert lines[decided]["data"] == {"id": lines[asked]["data"]["id"], "outcome": "allowed-once"}
    request = json.loads((env["tmp"] / "approver-called.jsonl").read_text().splitlines()[0])
    assert request["approval_id"] == lines[asked]["data"]["id"]
    assert request["tool_name"] == "write" and request["delegation_depth"] == 0
    assert request["action"] == {"tool": "write", "path": "approved.txt"}


def test_ask_rejected_by_approver_writes_nothing(env: dict[str, Any]) -> None:
    proc, lines = run_json(
        env,
        [write_call("rejected.txt"), {"text": "it was rejected", "expect": "rejected"}],
        "--plugin",
        "ask_tools",
        "--approver",
        approver(env["tmp"], '{"outcome": "rejected"}'),
    )
    assert proc.returncode == 0, proc.stderr
    assert not (env["workspace"] / "rejected.txt").exists()
    result = next(line for line in lines if line["type"] == "tool/result")
    assert result["data"]["content"] == 'Error: the user rejected tool "write"'
    assert result["data"]["is_error"] is True


def test_garbage_from_the_approver_is_unavailable(env: dict[str, Any]) -> None:
    proc, lines = run_json(
        env,
        [write_call("never.txt"), {"text": "no channel"}],
        "--plugin",
        "ask_tools",
        "--approver",
        approver(env["tmp"], "yes please"),
    )
    assert proc.returncode == 0, proc.stderr
    assert not (env["workspace"] / "never.txt").exists()
    decided = next(line for line in lines if line["type"] == "approval/decided")
    assert decided["data"]["outcome"] == "unavailable"
    assert decided["data"]["failure"] == {"kind": "invalid-output", "excerpt": "yes please"}
    result = next(line for line in lines if line["type"] == "tool/result")
    assert result["data"]["content"] == (
        'Error: tool "write" requires approval, but the configured approver printed something '
        "that is not an answer: yes please, so it is unavailable"
    )
    assert proc.stderr.splitlines() == [
        "tether: the configured approver printed something that is not an answer: yes please; "
        "the ask is unavailable"
    ]


def test_policy_never_rejects_without_running_the_approver(env: dict[str, Any]) -> None:
    proc, lines = run_json(
        env,
        [write_call("never.txt"), {"text": "rejected"}],
        "--plugin",
        "ask_tools",
        "--approval",
        "never",
        "--approver",
        approver(env["tmp"], "allowed-once"),
    )
    assert proc.returncode == 0, proc.stderr
    assert not (env["workspace"] / "never.txt").exists()
    assert not (env["tmp"] / "approver-called.jsonl").exists()
    decided = next(line for line in lines if line["type"] == "approval/decided")
    assert decided["data"]["outcome"] == "rejected"


def test_read_only_sandbox_denies_the_write_with_the_marker(env: dict[str, Any]) -> None:
    proc, lines = run_json(
        env, [write_call("ro.txt"), {"text": "denied"}], "--sandbox", "read-only"
    )
    assert proc.returncode == 0, proc.stderr
    assert not (env["workspace"] / "ro.txt").exists()
    result = next(line for line in lines if line["type"] == "tool/result")
    first, hint = result["data"]["content"].split("\n")
    assert first.endswith("[sandbox: file access denied under read-only mode]")
    # a root under "ask" is told how to escalate (a confining backend is mounted)
    assert 'sandbox_permissions: "workspace-write"' in hint
    assert lines[0]["data"] == {"mode": "read-only"}


def test_resume_continues_the_stored_session(env: dict[str, Any]) -> None:
    first, lines = run_json(env, [{"text": "first answer"}, {"text": "second answer"}])
    assert first.returncode == 0, first.stderr
    session = lines[-1]["session"]
    second, resumed = run_json(
        env, [{"text": "first answer"}, {"text": "second answer"}], "--resume", session
    )
    assert second.returncode == 0, second.stderr
    assert resumed[-1]["session"] == session
    assert resumed[-1]["output"] == "second answer"
    assert resumed[0]["type"] == "session/end-seed"
    assert not any(line["type"] in ("sandbox/mode", "approval/policy") for line in resumed)
    turn = next(line for line in resumed if line["type"] == "turn/start")
    assert turn["data"] == {"turn": 2}


def test_resume_refuses_scope_flags(env: dict[str, Any]) -> None:
    proc, _ = run_json(env, [{"text": "x"}], "--resume", "whatever", "--sandbox", "read-only")
    assert proc.returncode == 2
    assert "cannot change a resumed session" in proc.stderr


def test_failed_turn_exits_non_zero_with_one_line(env: dict[str, Any]) -> None:
    proc, lines = run_json(env, [{"text": "x", "expect": "no such text"}])
    assert proc.returncode == 1
    assert lines[-1]["stop_reason"] == "error"
    assert len(proc.stderr.strip().splitlines()) == 1
    assert proc.stderr.startswith("tether: run: the turn ended error: MODEL_SCRIPT")


def test_missing_model_configuration_names_the_options(env: dict[str, Any]) -> None:
    proc = tether("run", "--store", env["store"], "--workspace", str(env["workspace"]), "hi")
    assert proc.returncode == 1
    assert "scripted:PATH" in proc.stderr and "deepseek:MODEL" in proc.stderr


def test_demo_runs_offline(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'demo.db'}"
    proc = tether("demo", "--store", store)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "demo completed" in out
    assert "NOTES.md written by the read-only reviewer: False" in out
    assert "build/build.log written by the builder's confined command: True" in out
    assert "file outside the workspace created: False" in out
    assert 'the user rejected escalating this operation to "workspace-write"' in out
    assert "approval/pending" in out and "Subagent approval: run" in out
    assert "mode read-only (delegation)" in out and "mode workspace-write (delegation)" in out
    command = out.splitlines()[
        out.splitlines().index("the logs are stored in " + store + "; look again with:") + 1
    ]
    tree = tether(*command.split()[1:])
    assert tree.returncode == 0 and "[review notes]" in tree.stdout and "[build]" in tree.stdout


def test_demo_json_streams_events(tmp_path: Path) -> None:
    proc = tether("demo", "--json", "--store", f"sqlite:///{tmp_path / 'demo.db'}")
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len({e["session"] for e in events}) == 3
    assert events[-1]["type"] == "turn/end" and events[-1]["data"]["reason"] == "completed"
    root = events[0]["session"]
    by_session: dict[str, list[dict[str, Any]]] = {}
    for e in events:
        by_session.setdefault(e["session"], []).append(e)
    children = [s for s in by_session if s != root]
    # 1. delegation events in each child's log
    for child in children:
        pins = [(e["type"], e["data"]) for e in by_session[child] if e["data"].get("source")]
        assert ("approval/policy", {"policy": "never", "source": "delegation"}) in pins
    modes = {
        e["data"]["mode"] for c in children for e in by_session[c] if e["type"] == "sandbox/mode"
    }
    assert modes == {"read-only", "workspace-write"}
    # 2. the reviewer's rejected escalation, with its audit pair
    [reviewer] = [
        c
        for c in children
        if any(
            e["type"] == "sandbox/mode" and e["data"]["mode"] == "read-only" for e in by_session[c]
        )
    ]
    [asked] = [e for e in by_session[reviewer] if e["type"] == "approval/asked"]
    assert asked["data"]["reason"].startswith("escalate sandbox to workspace-write: ")
    [decided] = [e for e in by_session[reviewer] if e["type"] == "approval/decided"]
    assert decided["data"] == {"id": asked["data"]["id"], "outcome": "rejected"}
    # 3. the builder's guarded bash routed to the root and answered
    [builder] = [c for c in children if c != reviewer]
    [routed] = [e for e in by_session[builder] if e["type"] == "approval/asked"]
    assert routed["data"]["routed_to"] == root and routed["data"]["tool_name"] == "bash"
    pending = [e["data"] for e in by_session[root] if e["type"] == "approval/pending"]
    assert [p["state"] for p in pending] == ["pending", "decided"]
    assert pending[1]["outcome"] == "allowed-once"
    # 4. after the root widened, the cold-resumed builder kept its recorded scope
    widened = next(
        i
        for i, e in enumerate(events)
        if e["session"] == root
        and e["type"] == "sandbox/mode"
        and e["data"]["mode"] == "danger-full-access"
    )
    after = [e for e in events[widened:] if e["session"] == builder]
    assert after[0]["type"] == "session/end-seed"  # cold resume
    assert not any(e["type"] == "sandbox/mode" for e in after)
    denial = next(e for e in after if e["type"] == "tool/result")
    assert "[sandbox: file access denied under workspace-write mode]" in denial["data"]["content"]


def test_plain_run_prints_the_output_and_a_summary(env: dict[str, Any]) -> None:
    model = script(env["tmp"] / "script.json", [write_call("s.txt"), {"text": "Summary done."}])
    proc = tether(
        "run",
        "--model",
        f"scripted:{model}",
        "--workspace",
        str(env["workspace"]),
        "--store",
        env["store"],
        "--plugin",
        "ask_tools",
        "--approver",
        approver(env["tmp"], "allowed-once"),
        "go",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Summary done.\n"
    tool, line = proc.stderr.splitlines()
    assert tool == "tether: write: s.txt"  # as the call starts
    assert line.startswith(
        "tether: 1 turn · 1 tool call · approvals: 1 asked, 1 granted, 0 denied · no children · "
    )
    assert " tokens (" in line and " · session " in line


def test_at_a_terminal_text_streams_and_a_spinner_shows(env: dict[str, Any]) -> None:
    import os
    import select

    model = script(env["tmp"] / "script.json", [{"text": "streamed words arrive"}])
    master, slave = os.openpty()
    proc = subprocess.Popen(
        [
            TETHER,
            "run",
            "--model",
            f"scripted:{model}",
            "--workspace",
            str(env["workspace"]),
            "--store",
            env["store"],
            "hello",
        ],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        close_fds=True,
    )
    os.close(slave)
    seen = b""
    try:
        while proc.poll() is None or select.select([master], [], [], 0.1)[0]:
            if select.select([master], [], [], 0.2)[0]:
                try:
                    chunk = os.read(master, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                seen += chunk
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        os.close(master)
    text = seen.decode(errors="replace")
    assert "streamed words arrive" in text
    assert "tether: 1 turn" in text


@pytest.mark.parametrize(
    ("preset", "mode", "policy"),
    [
        ("plan", "read-only", "ask"),
        ("read-only", "read-only", "ask"),
        ("danger-full-access", "danger-full-access", "never"),
    ],
)
def test_permission_flag_pins_the_preset_and_both_knobs(
    env: dict[str, Any], preset: str, mode: str, policy: str
) -> None:
    proc, lines = run_json(env, [{"text": "ok"}], "--permission", preset)
    assert proc.returncode == 0, proc.stderr
    assert [(line["type"], line["data"]) for line in lines[:3]] == [
        ("permission/preset", {"preset": preset}),
        ("sandbox/mode", {"mode": mode}),
        ("approval/policy", {"policy": policy}),
    ]
    context = next(
        line["data"]["content"]
        for line in lines
        if line["type"] == "user/message" and line["data"]["content"].startswith("Current runtime")
    )
    assert ("Plan mode: the user wants a plan" in context) == (preset == "plan")


def test_permission_flag_refuses_an_unknown_preset_before_the_model(env: dict[str, Any]) -> None:
    proc, lines = run_json(env, [{"text": "never asked"}], "--permission", "acceptEdits")
    assert proc.returncode != 0
    assert lines == []
    assert (
        "UNKNOWN_PRESET: unknown permission preset 'acceptEdits' (presets: workspace-write, "
        "read-only, plan, danger-full-access)" in proc.stderr
    )
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "extra",
    [
        ("--permission", "plan", "--sandbox", "workspace-write"),
        ("--permission", "plan", "--approval", "never"),
    ],
)
def test_permission_flag_is_given_whole_or_as_knobs(
    env: dict[str, Any], extra: tuple[str, ...]
) -> None:
    proc, lines = run_json(env, [{"text": "never asked"}], *extra)
    assert proc.returncode == 2
    assert lines == []
    assert proc.stderr == (
        "tether: run: --permission names both knobs; give it or --sandbox/--approval, not both\n"
    )


def test_resume_refuses_a_permission_preset(env: dict[str, Any]) -> None:
    proc, _ = run_json(env, [{"text": "x"}], "--resume", "whatever", "--permission", "plan")
    assert proc.returncode == 2
    assert proc.stderr == (
        "tether: run: --sandbox/--approval/--permission cannot change a resumed session: its "
        "recorded scope is replayed from its log\n"
    )
