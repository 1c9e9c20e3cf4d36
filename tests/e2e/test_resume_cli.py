"""``tether run --continue`` / ``--resume last`` / ``--resume PREFIX`` end to end: the real
console script, the scripted model and a real SQLite store."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cli_support import run_args, tether
from script_support import script

pytestmark = pytest.mark.timeout(120)

STEPS: list[dict[str, Any]] = [{"text": "first answer"}, {"text": "second answer"}]


def run_json(
    env: dict[str, Any], workspace: Path, *extra: str
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    model = script(env["tmp"] / "script.json", STEPS)
    proc = tether(*run_args(model, workspace, env["store"], *extra))
    return proc, [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def new_session(env: dict[str, Any], workspace: Path) -> str:
    proc, lines = run_json(env, workspace)
    assert proc.returncode == 0, proc.stderr
    return str(lines[-1]["session"])


def test_continue_picks_the_newest_root_session_of_this_workspace(env: dict[str, Any]) -> None:
    other = env["tmp"] / "other"
    other.mkdir()
    older = new_session(env, env["workspace"])
    newer = new_session(env, env["workspace"])
    elsewhere = new_session(env, other)  # newest of all, but of another workspace
    for flags in (("--continue",), ("-c",), ("--resume", "last")):
        proc, lines = run_json(env, env["workspace"], *flags)
        assert proc.returncode == 0, proc.stderr
        assert lines[-1]["session"] == newer, flags
    assert older != newer != elsewhere
    proc, lines = run_json(env, other, "--continue")
    assert lines[-1]["session"] == elsewhere


def test_resume_takes_a_unique_prefix(env: dict[str, Any]) -> None:
    session = new_session(env, env["workspace"])
    proc, lines = run_json(env, env["workspace"], "--resume", session[:6])
    assert proc.returncode == 0, proc.stderr
    assert lines[-1]["session"] == session
    assert lines[-1]["output"] == "second answer"


def test_continue_without_a_session_in_the_workspace_is_session_not_found(
    env: dict[str, Any],
) -> None:
    proc, lines = run_json(env, env["workspace"], "--continue")
    assert (proc.returncode, lines) == (1, [])
    workspace = Path(env["workspace"]).resolve()
    assert proc.stderr == (
        f"tether: SESSION_NOT_FOUND: no session of workspace {workspace} is stored "
        "(start one with tether run PROMPT)\n"
    )


def test_resume_with_an_unknown_prefix_is_session_not_found(env: dict[str, Any]) -> None:
    new_session(env, env["workspace"])
    proc, _ = run_json(env, env["workspace"], "--resume", "zz-no-such")
    assert proc.returncode == 1
    assert proc.stderr == "tether: SESSION_NOT_FOUND: session 'zz-no-such' not found\n"


def test_continue_and_resume_together_is_a_usage_error(env: dict[str, Any]) -> None:
    proc, _ = run_json(env, env["workspace"], "--continue", "--resume", "abc")
    assert (proc.returncode, proc.stderr) == (
        2,
        "tether: --continue is --resume last: give one of them\n",
    )
