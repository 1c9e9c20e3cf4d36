"""The harness's import path inside the workspace, against confined commands.

A project installed editable in its own ``.venv`` (``uv sync``, ``pip install -e``) puts
``WS/src`` (or ``WS/app``) on ``sys.path`` through a ``.pth`` file; with tether in that
``.venv``, every start of tether imports ``sitecustomize`` from there, and
``importlib.metadata`` reads the entry points of every ``*.dist-info`` there. The names
Python acts on in each directory of the import path are control paths, existing or not, in
both restricted modes and on every backend variant: no command can write, create, remove or
rename them, while the rest of the project's code stays writable. After each attempt the
host is compared with a snapshot taken before.
"""

from __future__ import annotations

import pytest
from sandbox_support import (
    PYTHON,
    VARIANTS,
    Host,
    changed,
    make_provider,
    run_confined,
    variant_mode_cases,
)

from tether.sandbox import _paths as paths

pytestmark = pytest.mark.timeout(120)


def tree(host: Host) -> dict[str, tuple[object, ...]]:
    return host.snapshot(include_ws=True)


def on_import_path(host: Host, monkeypatch: pytest.MonkeyPatch) -> None:
    """``ws/src`` (existing) and ``ws/lib/py`` (missing) on the harness's start-up import
    path, as an editable install's ``.pth`` file puts them there."""
    src = host.ws / "src"
    (src / "app.py").write_text("print('app')\n")
    (src / "existing.pth").write_text("/somewhere\n")
    (src / "pkg-1.0.dist-info").mkdir()
    (src / "pkg-1.0.dist-info" / "entry_points.txt").write_text("[console_scripts]\n")
    (src / "__pycache__").mkdir()
    (src / "__pycache__" / "app.cpython-311.pyc").write_bytes(b"\0")
    (src / "pkg").mkdir()
    (src / "pkg" / "mod.py").write_text("x = 1\n")
    (src / "planted").write_text("open('/tmp/pwned', 'w')\n")
    (host.ws / "lib").mkdir()
    started = getattr(paths, "STARTUP_IMPORT_PATH", ())  # (absent before the fix)
    entries = (*started, str(src), str(host.ws / "lib" / "py"))
    monkeypatch.setattr(paths, "STARTUP_IMPORT_PATH", entries, raising=False)


ATTACKS = (
    "echo 'import os' > src/sitecustomize.py",
    "echo 'import os' > src/usercustomize.py",
    "mkdir src/sitecustomize && echo 'import os' > src/sitecustomize/__init__.py",
    "echo x > src/sitecustomize.pyc",
    "echo x > src/sitecustomize.cpython-311-x86_64-linux-gnu.so",
    "echo x > src/__pycache__/sitecustomize.cpython-311.pyc",
    "echo 'import os' > src/evil.pth",
    "echo 'import os' >> src/existing.pth",
    "rm -f src/existing.pth",
    "mv src/existing.pth src/existing.pth.off",
    "mv src/planted src/sitecustomize.py",
    "ln -s planted src/sitecustomize.py",
    f"{PYTHON} -c \"import os; os.rename('src/planted', 'src/usercustomize.py')\"",
    "mkdir src/evil-1.0.dist-info",
    "echo '[console_scripts]' >> src/pkg-1.0.dist-info/entry_points.txt",
    "echo x > src/pkg-1.0.dist-info/RECORD",
    "rm -rf src/pkg-1.0.dist-info",
    "mkdir src/evil.egg-info",
    "echo /x > src/evil.egg-link",
    "echo x > src/SiteCustomize.py",
    "mkdir -p lib/py && echo 'import os' > lib/py/sitecustomize.py",
    "echo x > lib/py",
)


@pytest.mark.parametrize(("variant", "mode"), list(variant_mode_cases()))
async def test_what_python_runs_at_start_cannot_be_planted(
    host: Host, variant: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    on_import_path(host, monkeypatch)
    provider = make_provider(variant, host)
    before = tree(host)
    for attack in ATTACKS:
        ran = await run_confined(provider, host.policy(mode), attack)
        assert ran.command.runner_failure(ran.returncode, ran.stderr) is None, ran.stderr
        assert changed(before, tree(host)) == [], attack


@pytest.mark.parametrize("variant", VARIANTS)
async def test_the_projects_code_on_the_import_path_stays_writable(
    host: Host, variant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Agents keep editing the user's code: existing files in place, and anything inside
    the packages. Only new entries directly in the import-path directory need the file
    tools, and a denied command's result says so."""
    on_import_path(host, monkeypatch)
    provider = make_provider(variant, host)
    policy = host.policy("workspace-write")
    script = (
        "echo ok >> src/app.py && echo y = 2 >> src/pkg/mod.py && echo x > src/pkg/new.py && "
        "echo x > src/pkg/data.pth && mkdir src/pkg/sub && echo x > src/__pycache__/app.cpython-311.pyc"
    )
    ran = await run_confined(provider, policy, script)
    assert ran.returncode == 0, ran.stderr
    assert (host.ws / "src" / "app.py").read_text() == "print('app')\nok\n"
    assert (host.ws / "src" / "pkg" / "new.py").exists()
    assert (host.ws / "src" / "pkg" / "sub").is_dir()
    denied = await run_confined(provider, policy, "echo x > src/new_module.py")
    assert denied.returncode != 0
    assert not (host.ws / "src" / "new_module.py").exists()
    assert denied.command.denial_note is not None
    assert "nor in src (on the harness's Python import path)" in denied.command.denial_note


@pytest.mark.parametrize(("variant", "mode"), list(variant_mode_cases()))
async def test_the_base_installation_is_the_harness_code_too(
    host: Host, variant: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A virtual environment's interpreter runs the base installation's standard library
    (``sys.base_prefix``): inside the workspace, it is out of reach like the ``.venv``."""
    stdlib = host.ws / "python" / "lib" / "python3"
    stdlib.mkdir(parents=True)
    (stdlib / "os.py").write_text("# the real os\n")
    monkeypatch.setattr("sys.base_prefix", str(host.ws / "python"))
    monkeypatch.setattr("sys.base_exec_prefix", str(host.ws / "python"))
    provider = make_provider(variant, host)
    before = tree(host)
    for attack in (
        "echo 'import pwn' >> python/lib/python3/os.py",
        "echo 'import pwn' > python/lib/python3/sitecustomize.py",
        "mkdir python/lib/python3/site-packages",
        "rm -rf python/lib",
    ):
        ran = await run_confined(provider, host.policy(mode), attack)
        assert ran.command.runner_failure(ran.returncode, ran.stderr) is None, ran.stderr
        assert changed(before, tree(host)) == [], attack
