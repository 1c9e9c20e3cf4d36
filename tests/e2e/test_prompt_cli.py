"""``tether run`` and ``tether doctor`` as real processes: the system prompt flags, the project
instructions line, and the limits with their exit statuses."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from typing import Any

import pytest

from cli_support import run_args, tether
from script_support import call, script
from tether._dirs import config_dir

pytestmark = pytest.mark.timeout(120)


def lines_of(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_the_prompt_flags_replace_and_extend_the_system_prompt(env: dict[str, Any]) -> None:
    prompt = env["tmp"] / "prompt.md"
    prompt.write_text("You only answer questions about Rust.")
    model = script(env["tmp"] / "script.json", [{"text": "ok"}])
    proc = tether(
        *run_args(
            model,
            env["workspace"],
            env["store"],
            "--system-prompt-file",
            str(prompt),
            "--append-system-prompt",
            "Cite the file you read.",
        )
    )
    assert proc.returncode == 0, proc.stderr
    headers = [line["data"] for line in lines_of(proc.stdout) if line["type"] == "request/header"]
    assert [h["header"]["system"] for h in headers] == [
        "You only answer questions about Rust.\n\nCite the file you read."
    ]


def test_a_missing_prompt_file_is_one_line_and_nothing_runs(env: dict[str, Any]) -> None:
    missing = env["tmp"] / "missing.md"
    model = script(env["tmp"] / "script.json", [{"text": "ok"}])
    proc = tether(
        *run_args(model, env["workspace"], env["store"], "--system-prompt-file", str(missing))
    )
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == f"tether: CONFIG_FILE: --system-prompt-file {missing}: no such file\n"
    assert not (env["tmp"] / "store.db").exists()


def test_text_mode_says_which_instructions_were_used(env: dict[str, Any]) -> None:
    (env["workspace"] / "AGENTS.md").write_text("Run make test.\n")
    model = script(env["tmp"] / "script.json", [{"text": "ok"}])
    args = [a for a in run_args(model, env["workspace"], env["store"]) if a != "--json"]
    proc = tether(*args)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "ok\n"
    first, summary = proc.stderr.splitlines()
    assert first == "tether: project instructions: AGENTS.md (15 bytes)"
    assert summary.startswith("tether: 1 turn · ")


def test_doctor_lists_the_instructions_a_session_would_read(env: dict[str, Any]) -> None:
    workspace = env["workspace"]
    (workspace / "AGENTS.md").write_text("Run make test.\n")
    (workspace / "CLAUDE.md").symlink_to("AGENTS.md")
    user = config_dir()
    user.mkdir(parents=True)
    (user / "AGENTS.md").write_bytes(b"y" * 40_000)
    proc = tether("doctor", "--workspace", str(workspace), "--store", env["store"])
    tail = [line for line in proc.stdout.splitlines() if line.startswith("instructions")]
    digest = hashlib.sha256(b"y" * 32768).hexdigest()
    assert tail == [
        "instructions: 2 used, 32783 bytes (each new session reads them at its first turn)",
        f"instructions file {user}/AGENTS.md: used (32768 bytes of 40000, truncated, sha256 "
        f"{digest})",
        "instructions file AGENTS.md: used (15 bytes, sha256 "
        f"{hashlib.sha256(b'Run make test.' + bytes([10])).hexdigest()})",
        "instructions file CLAUDE.md: skipped (the same file as AGENTS.md)",
    ]


def test_max_steps_exits_3_with_the_reason(env: dict[str, Any]) -> None:
    model = script(env["tmp"] / "script.json", [call("ls", path=".") for _ in range(3)])
    proc = tether(*run_args(model, env["workspace"], env["store"], "--max-steps", "1"))
    assert proc.returncode == 3
    assert proc.stderr.splitlines()[-1] == (
        "tether: run: the turn ended max-steps: the turn reached its limit of 1 steps and "
        "stopped before step 2 (raise it with --max-steps, or max_steps in tether.toml)"
    )
    result = lines_of(proc.stdout)[-1]
    assert (result["type"], result["stop_reason"]) == ("run/result", "max-steps")


def test_max_turns_stops_a_stop_hook_that_never_lets_go(env: dict[str, Any]) -> None:
    workspace = env["workspace"]
    hook = workspace / ".claude" / "hooks" / "again.sh"
    hook.parent.mkdir(parents=True)
    hook.write_text('#!/bin/sh\necho \'{"decision": "block", "reason": "keep going"}\'\n')
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    (workspace / ".claude" / "settings.json").write_text(
        json.dumps({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": str(hook)}]}]}})
    )
    (workspace / "tether.toml").write_text(
        '[[plugins]]\nname = "hooks"\nconfig = { settings_files = [".claude/settings.json"] }\n'
    )
    model = script(env["tmp"] / "script.json", [{"text": f"turn {n}"} for n in range(1, 6)])
    proc = tether(
        *run_args(model, workspace, env["store"], "--max-turns", "2", "--trust-workspace")
    )
    assert proc.returncode == 4, proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        "tether: run: the run ended max-turns: the run reached its limit of 2 turns; 1 queued "
        "input was not run (raise it with --max-turns, or max_turns in tether.toml)"
    )
    lines = lines_of(proc.stdout)
    assert [line["data"]["reason"] for line in lines if line["type"] == "turn/end"] == [
        "completed",
        "completed",
    ]
    assert lines[-1]["stop_reason"] == "max-turns"
    assert lines[-1]["output"] == "turn 2"


@pytest.mark.parametrize("flag", ["--max-steps", "--max-turns"])
def test_a_limit_below_one_is_a_usage_error(env: dict[str, Any], flag: str) -> None:
    model = script(env["tmp"] / "script.json", [{"text": "ok"}])
    proc = tether(*run_args(model, env["workspace"], env["store"], flag, "0"))
    assert proc.returncode == 2
    assert not (env["tmp"] / "store.db").exists()
    assert os.path.isdir(env["workspace"])
