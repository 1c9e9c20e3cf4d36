"""A ``bwrap`` planted on ``PATH`` inside the workspace, through ``tether run`` and ``tether
doctor``.

An activated project ``.venv``, ``node_modules/.bin`` or direnv's ``PATH_add bin`` put a
directory of the workspace on ``PATH``. A ``bwrap`` a confined command wrote there would run
as the user (as root: with every capability), unconfined, the first time anything probes it.
``tether run`` never probes it, and now says so on stderr (it falls back to Landlock);
``tether doctor`` checks the workspace it describes (``--workspace``, default the current
directory) the same way before it probes anything, and shows why bwrap was rejected.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sandbox_support import Host

TETHER = str(Path(sys.executable).parent / "tether")

pytestmark = [pytest.mark.timeout(120), pytest.mark.bwrap]


def plant_bwrap(host: Host) -> tuple[Path, dict[str, str]]:
    """``ws/bin/bwrap``, which records that it ran and then behaves like the real one, and
    an environment with ``ws/bin`` first on ``PATH``."""
    real = shutil.which("bwrap")
    assert real is not None
    planted = host.ws / "bin" / "bwrap"
    planted.parent.mkdir()
    planted.write_text(f'#!/bin/sh\necho ran >> {host.outside}/bwrap-ran\nexec {real} "$@"\n')
    planted.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "TETHER_SANDBOX_DISABLE"}
    env["PATH"] = f"{planted.parent}:{env['PATH']}"
    return planted, env


def rejection(host: Host, planted: Path) -> str:
    return (
        f"the sandbox runner {planted} lies inside the workspace {host.ws}, where a confined "
        "command could rewrite it and run unconfined next time; install it outside the "
        "workspace (for example in /usr/local/bin) and point runner_command or bwrap_path there"
    )


def test_tether_run_never_runs_it_and_says_so(host: Host) -> None:
    planted, env = plant_bwrap(host)
    script = host.top / "script.json"
    steps = [{"tool_calls": [{"name": "bash", "arguments": {"command": "echo confined"}}]}]
    script.write_text(json.dumps({"agents": [{"match": {}, "steps": [*steps, {"text": "ok"}]}]}))
    done = subprocess.run(
        [
            TETHER, "run", "--model", f"scripted:{script}", "--workspace", str(host.ws),
            "--store", f"jsonl://{host.top / 'store'}", "--sandbox", "workspace-write",
            "--json", "go",
        ],
        capture_output=True, text=True, env=env, timeout=100, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not (host.outside / "bwrap-ran").exists()
    lines = [line for line in done.stderr.splitlines() if "bwrap" in line]
    assert lines == [f"sandbox: bwrap is not used: {rejection(host, planted)}"]
    assert "confined" in done.stdout  # the command ran, under Landlock


@pytest.mark.parametrize("how", ["--workspace", "cwd"])
def test_tether_doctor_never_runs_it_and_shows_why(host: Host, how: str) -> None:
    planted, env = plant_bwrap(host)
    args = ["--workspace", str(host.ws)] if how == "--workspace" else []
    done = subprocess.run(
        [TETHER, "doctor", "--store", f"sqlite:///{host.top / 'd.db'}", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=host.ws if how == "cwd" else host.top,
        timeout=60,
        check=False,
    )
    assert not (host.outside / "bwrap-ran").exists()
    lines = [line for line in done.stdout.splitlines() if line.startswith("sandbox bwrap:")]
    assert lines == [f"sandbox bwrap: rejected: {rejection(host, planted)}"]
    assert any(line.startswith("sandbox landlock: chosen:") for line in done.stdout.splitlines())
