"""The harness's own code inside the workspace, driven through ``tether run``.

A common layout: tether installed in the project's own ``.venv``. A ``workspace-write`` agent
that could add a ``.pth`` file there (Python runs it at start-up) or change tether's modules
would run its code, unconfined, at the user's next ``tether`` command. The interpreter's
prefix, its site directories and tether's package are control paths: commands and file tools
can read them and never change them, on both backends, and the next start of that
interpreter runs nothing the agent wrote. The same holds for the project's own source
directory when the project is installed editable in that ``.venv`` (``uv sync``): it is on
the import path, where every start imports ``sitecustomize``.
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
            "from tether.surfaces.cli._app import main; main()",
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


def scripted(host: Host, steps: list[dict[str, object]], name: str) -> Path:
    path = host.top / name
    path.write_text(json.dumps({"agents": [{"match": {}, "steps": [*steps, {"text": "done"}]}]}))
    return path


def tether_run(
    python: Path | str, host: Host, script: Path, backend: str, *, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``tether run`` started by ``python -c`` (``""``, the working directory, first on its
    import path, as ``python -m`` would put it)."""
    env = {**os.environ, "TETHER_SANDBOX_DISABLE": "bwrap" if backend == "landlock" else ""}
    return subprocess.run(
        [
            str(python),
            "-c",
            "from tether.surfaces.cli._app import main; main()",
            "run",
            "--model",
            f"scripted:{script}",
            "--workspace",
            str(host.ws),
            "--store",
            f"jsonl://{host.top / 'store'}",
            "--sandbox",
            "workspace-write",
            "--json",
            "go",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=100,
        check=False,
    )


def tool_results(done: subprocess.CompletedProcess[str]) -> list[str]:
    events = [json.loads(line) for line in done.stdout.splitlines()]
    return [e["data"]["content"] for e in events if e.get("type") == "tool/result"]


@pytest.mark.parametrize("backend", [pytest.param("bwrap", marks=pytest.mark.bwrap), "landlock"])
def test_an_editable_projects_source_on_the_import_path_runs_nothing_the_agent_wrote(
    host: Host, backend: str
) -> None:
    """The project installed editable in the ``.venv`` that runs tether (as ``uv sync``
    does): ``ws/src`` is on tether's import path, after the site directories. A command
    planting ``src/sitecustomize.py``, or the ``write`` tool planting it or an entry point,
    is refused; the next start of that interpreter runs nothing the agent wrote, and the
    project's code stays editable."""
    venv = project_venv(host)
    packages = venv / "lib" / VERSION / "site-packages"
    (packages / "_myproject.pth").write_text(f"{host.ws / 'src'}\n")
    (host.ws / "src" / "app.py").write_text("print('app')\n")
    payload = f"import pathlib; pathlib.Path({str(host.outside / 'pwned')!r}).write_text('x')"
    script = scripted(
        host,
        [
            {"tool_calls": [{"name": "bash", "arguments": {
                "command": f"echo {json.dumps(payload)} > src/sitecustomize.py"}}]},
            {"tool_calls": [{"name": "write", "arguments": {
                "path": "src/sitecustomize.py", "content": payload}}]},
            {"tool_calls": [{"name": "write", "arguments": {
                "path": "src/evil-1.0.dist-info/entry_points.txt",
                "content": "[console_scripts]\ntether = evil:main\n"}}]},
            {"tool_calls": [{"name": "bash", "arguments": {
                "command": "echo \"print('changed')\" > src/app.py"}}]},
        ],
        "attack.json",
    )  # fmt: skip
    done = tether_run(venv / "bin" / "python", host, script, backend)
    assert done.returncode == 0, done.stderr
    marker = "[sandbox: file access denied under workspace-write mode]"
    assert [marker in r for r in tool_results(done)] == [True, True, True, False]
    assert sorted(p.name for p in (host.ws / "src").iterdir()) == ["app.py"]
    assert (host.ws / "src" / "app.py").read_text() == "print('changed')\n"
    subprocess.run([str(venv / "bin" / "python"), "-c", "pass"], check=True, timeout=30)
    assert not (host.outside / "pwned").exists()


def test_tether_started_from_inside_the_workspace_says_so(host: Host) -> None:
    """``python -c``/``-m`` run from inside the workspace puts it first on the import path,
    before the site directories: every module there shadows tether's own and its
    dependencies. The harness says so on stderr (it is not a supported way to start tether
    on an agent's workspace)."""
    script = scripted(host, [], "quiet.json")
    done = tether_run(sys.executable, host, script, "landlock", cwd=host.ws)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "import path" in line]
    assert warnings == [
        f"sandbox: Python's import path starts with {host.ws}, inside the workspace: what an "
        "agent writes there runs unconfined at tether's next start; start tether with its own "
        "command (not python -m from inside the workspace, nor a PYTHONPATH there)"
    ]
    elsewhere = tether_run(sys.executable, host, script, "landlock", cwd=host.outside)
    assert "import path" not in elsewhere.stderr
