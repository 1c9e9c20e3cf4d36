"""``tether doctor``: model configuration, store, sandbox backends, plugins."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from cli_support import tether


def doctor(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        k: v for k, v in os.environ.items() if k not in ("TETHER_MODEL", "TETHER_SANDBOX_DISABLE")
    }
    return tether("doctor", "--store", f"sqlite:///{tmp_path / 'd.db'}", env={**base, **env})


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
    assert (
        "model: problem: TETHER_MODEL is not set (pass --model scripted:PATH, openai:MODEL or deepseek:MODEL)"
        in ran.stdout
    )
