"""``tether run --continue`` / ``--resume last`` / ``--resume PREFIX`` end to end: the real
console script, the scripted model and a real SQLite store."""

from __future__ import annotations

import json
import os
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
    # the first request over the stored log says it resumes (the reference harness's layout)
    headers = [line["data"] for line in lines if line.get("type") == "request/header"]
    assert [h["reason"] for h in headers] == ["resume"]


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


def resume_args(env: dict[str, Any], *extra: str) -> list[str]:
    """``tether run --json`` without ``--model``: what a resumed session runs on is its own."""
    workspace, store = str(env["workspace"]), env["store"]
    return ["run", "--workspace", workspace, "--store", store, "--json", *extra, "again"]


def without_model_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("TETHER_MODEL", "TETHER_STORE")}


def test_the_model_and_its_settings_are_remembered_on_resume(env: dict[str, Any]) -> None:
    model = script(env["tmp"] / "script.json", STEPS)
    proc = tether(*run_args(model, env["workspace"], env["store"], "--model-timeout", "7"))
    first = [json.loads(line) for line in proc.stdout.splitlines()]
    recorded = [line["data"] for line in first if line["type"] == "session/model"]
    assert recorded == [{"model": f"scripted:{model}", "model_timeout": 7.0}]
    resumed = tether(*resume_args(env, "--continue"), env=without_model_env())
    assert resumed.returncode == 0, resumed.stderr
    lines = [json.loads(line) for line in resumed.stdout.splitlines()]
    assert lines[-1]["output"] == "second answer"
    # nothing new is recorded on resume: the session's choice stays its first one
    assert not any(line["type"] == "session/model" for line in lines)


def test_a_flag_on_resume_overrides_the_recorded_model(env: dict[str, Any]) -> None:
    new_session(env, env["workspace"])
    # A script answers by the step the session is at: its second step answers the resume.
    other = script(env["tmp"] / "other.json", [{"text": "-"}, {"text": "from the other model"}])
    proc = tether(*resume_args(env, "--continue", "--model", f"scripted:{other}"))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1])["output"] == "from the other model"


def test_a_recorded_name_resolves_only_through_the_users_config(
    env: dict[str, Any], tmp_path: Path
) -> None:
    # An imported session's log names a model the user's configuration does not define: the
    # resume fails as --model with that name would, and asks no model anything.
    session = new_session(env, env["workspace"])
    exported = tether("sessions", "export", session, "--store", env["store"]).stdout
    lines = [json.loads(line) for line in exported.splitlines()]
    for line in lines:
        if line.get("type") == "session/model":
            line["data"] = {"model": "proxy-of-the-agent"}
    other_store = f"sqlite:///{tmp_path / 'other.db'}"
    archive = tmp_path / "edited.jsonl"
    archive.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert tether("sessions", "import", str(archive), "--store", other_store).returncode == 0
    workspace, env_vars = str(env["workspace"]), without_model_env()
    args = ["run", "--workspace", workspace, "--store", other_store, "--resume", session, "x"]
    proc = tether(*args, env=env_vars)
    assert proc.returncode == 1
    assert proc.stderr.startswith(
        "tether: MODEL_CONFIG: invalid model spec 'proxy-of-the-agent': not KIND:TARGET and not "
        "a configured model"
    )
