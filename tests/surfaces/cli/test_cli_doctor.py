"""``tether doctor``: model configuration, store, sandbox backends, plugins."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from cli_support import tether


def doctor(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TETHER_MODEL", "TETHER_SANDBOX_DISABLE", "DEEPSEEK_BASE_URL")
    }
    return tether("doctor", "--store", f"sqlite:///{tmp_path / 'd.db'}", env={**base, **env})


@pytest.mark.bwrap
def test_doctor_reports_each_part(tmp_path: Path) -> None:
    ran = doctor(tmp_path, TETHER_MODEL="deepseek:deepseek-chat", DEEPSEEK_API_KEY="")
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert lines[0].startswith("tether ")
    assert "model: problem: deepseek:deepseek-chat needs DEEPSEEK_API_KEY" in lines
    assert f"store: ok: sqlite:///{tmp_path / 'd.db'} (0 sessions)" in lines
    assert any(line.startswith("sandbox bwrap: chosen: bubblewrap") for line in lines)
    assert any(line.startswith("sandbox landlock: available: Landlock ABI") for line in lines)
    plugins = next(line for line in lines if line.startswith("plugins: "))
    for name in ("approval", "bash", "hooks", "root_approvals", "sandbox", "subagents"):
        assert name in plugins


def test_doctor_says_why_a_backend_was_rejected(tmp_path: Path) -> None:
    ran = doctor(tmp_path, TETHER_MODEL="scripted:/x.json", TETHER_SANDBOX_DISABLE="bwrap")
    lines = ran.stdout.splitlines()
    assert "model: ok: scripted:/x.json" in lines
    assert any(line.startswith("sandbox bwrap: disabled") for line in lines)
    assert any(line.startswith("sandbox landlock: chosen") for line in lines)


def test_a_missing_model_is_reported_with_the_options(tmp_path: Path) -> None:
    ran = doctor(tmp_path)
    user_file = Path(os.environ["XDG_CONFIG_HOME"]) / "tether" / "tether.toml"
    assert (
        "model: problem: no model configured (pass --model SPEC, set TETHER_MODEL, or set "
        f"[model] default in {user_file})"
    ) in ran.stdout.splitlines()


def test_the_configured_default_and_where_its_key_goes(tmp_path: Path) -> None:
    user_file = Path(os.environ["XDG_CONFIG_HOME"]) / "tether" / "tether.toml"
    user_file.parent.mkdir(parents=True)
    user_file.write_text(
        '[model]\ndefault = "local"\n\n'
        '[models.local]\nmodel = "openai:qwen"\nbase_url = "http://127.0.0.1:8080/v1"\n'
        '[models.router]\nmodel = "openai:x"\nbase_url = "https://openrouter.ai/api/v1"\n'
        'api_key_env = "OPENROUTER_API_KEY"\n'
    )
    lines = doctor(tmp_path, OPENAI_API_KEY="sk-o").stdout.splitlines()
    assert (
        f"model: ok: local (default model in {user_file}; sends no API key to "
        "http://127.0.0.1:8080/v1)"
    ) in lines
    lines = doctor(tmp_path, TETHER_MODEL="router").stdout.splitlines()
    assert "model: problem: router needs OPENROUTER_API_KEY" in lines
    lines = doctor(tmp_path, TETHER_MODEL="deepseek:deepseek-chat", DEEPSEEK_API_KEY="k")
    assert (
        "model: ok: deepseek:deepseek-chat (TETHER_MODEL value; sends DEEPSEEK_API_KEY to "
        "https://api.deepseek.com)"
    ) in lines.stdout.splitlines()


def test_a_workspace_default_counts_only_once_trusted(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "tether.toml").write_text('[model]\ndefault = "deepseek:deepseek-reasoner"\n')
    base = {k: v for k, v in os.environ.items() if k not in ("TETHER_MODEL", "DEEPSEEK_BASE_URL")}
    env = {**base, "DEEPSEEK_API_KEY": "k"}
    store = f"sqlite:///{tmp_path / 'd.db'}"

    def model_line() -> str:
        ran = tether("doctor", "--store", store, "--workspace", str(ws), env=env)
        return next(line for line in ran.stdout.splitlines() if line.startswith("model: "))

    assert model_line().startswith("model: problem: no model configured")
    assert tether("trust", "--workspace", str(ws), env=env).returncode == 0
    assert model_line() == (
        "model: ok: deepseek:deepseek-reasoner (default model in tether.toml; sends "
        "DEEPSEEK_API_KEY to https://api.deepseek.com)"
    )
