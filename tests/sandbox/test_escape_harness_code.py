"""The harness's own code inside the workspace, driven through ``tether run``.

A common layout: tether installed in the project's own ``.venv``. A ``workspace-write`` agent
that could add a ``.pth`` file there (Python runs it at start-up) or change tether's modules
would run its code, unconfined, at the user's next ``tether`` command. The interpreter's
prefix, its site directories and tether's package are control paths: commands and file tools
can read them and never change them, on both backends, and the next start of that
interpreter runs nothing the agent wrote.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
from pathlib import Path

import pytest
from sandbox_support import Host

import tether

pytestmark = pytest.mark.timeout(120)

VERSION = f"python{sys.version_info.major}.{sys.version_info.minor}"


def project_venv(host: Host) -> Path:
    """``ws/.venv``, importing tether and its dependencies from this test's environment (a
    ``.pth`` file instead of an install, which would need the network)."""
    venv = host.ws / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    source = str(Path(tether.__file__).resolve().parent.parent)
    (venv / "lib" / VERSION / "site-packages" / "tether-dev.pth").write_text(
        "\n".join([source, *site.getsitepackages()]) + "\n"
    )
    return venv


def attack_script(host: Host) -> Path:
    packages = f".venv/lib/{VERSION}/site-packages"
    payload = f"import pathlib; pathlib.Path({str(host.outside / 'pwned')!r}).write_text('x')"
    steps = [
        {
            "tool_calls": [
                {
                    "name": "bash",
                    "arguments": {
                        "command": f"echo {json.dumps(payload)} > {packages}/evil.pth; "
                        "echo include-system-site-packages = true >> .venv/pyvenv.cfg"
                    },
                }
            ]
        },
        {
            "tool_calls": [
                {
                    "name": "write",
                    "arguments": {"path": f"{packages}/evil2.pth", "content": payload},
                }
            ]
        },
        {"text": "done"},
    ]
    path = host.top / "attack.json"
    path.write_text(json.dumps({"agents": [{"match": {}, "steps": steps}]}))
    return path


@pytest.mark.parametrize("backend", [pytest.param("bwrap", marks=pytest.mark.bwrap), "landlock"])
def test_a_workspace_venv_running_tether_is_out_of_the_agents_reach(
    host: Host, backend: str
) -> None:
    venv = project_venv(host)
    config = (venv / "pyvenv.cfg").read_text()
    store = host.top / "store"
    script = attack_script(host)
    before = host.snapshot(include_ws=False)
    env = {**os.environ, "TETHER_SANDBOX_DISABLE": "bwrap" if backend == "landlock" else ""}
    done = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "from tether.surfaces.cli.app import main; main()",
            "run",
            "--model",
            f"scripted:{script}",
            "--workspace",
            str(host.ws),
            "--store",
            f"jsonl://{store}",
            "--sandbox",
            "workspace-write",
            "--json",
            "go",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=100,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    results = [
        json.loads(line)["data"]
        for line in done.stdout.splitlines()
        if json.loads(line).get("type") == "tool/result"
    ]
    marker = "[sandbox: file access denied under workspace-write mode]"
    assert [marker in r["content"] for r in results] == [True, True]
    packages = venv / "lib" / VERSION / "site-packages"
    assert sorted(p.name for p in packages.iterdir()) == ["tether-dev.pth"]
    assert (venv / "pyvenv.cfg").read_text() == config
    # the next start of that interpreter runs nothing the agent wrote
    subprocess.run([str(venv / "bin" / "python"), "-c", "pass"], check=True, timeout=30)
    assert not (host.outside / "pwned").exists()
    after = host.snapshot(include_ws=False)
    assert {k: v for k, v in after.items() if not k.startswith("store")} == {
        k: v for k, v in before.items() if not k.startswith("store")
    }
