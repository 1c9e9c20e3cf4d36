"""The installed ``tether`` console script, run as a real process (no tests here)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

TETHER: Final = str(Path(sys.executable).parent / "tether")
ASK_EVERY_CALL: Final = (
    "--sandbox", "workspace-write", "--approval", "ask", "--plugin", "ask_tools",
)  # fmt: skip
"""``tether run`` options under which every tool call asks (the ``ask_tools`` gate)."""
"""The console script installed beside the interpreter running the tests."""


def sqlite_store(directory: Path) -> str:
    """The URL of a SQLite store in ``directory`` (``--store``, ``Harness.open(store=...)``)."""
    return f"sqlite:///{directory / 'store.db'}"


def tether(
    *args: str, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``tether ARGS`` to its end, text captured, in ``env`` (default: this process's
    environment); the exit status is the caller's to check."""
    return subprocess.run(
        [TETHER, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=100, check=False
    )


def tether_bytes(
    *args: str, env: Mapping[str, str] | None = None, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    """``tether ARGS`` with bytes in and out, in this environment without ``TETHER_STORE``
    and with ``env`` added."""
    base = {key: value for key, value in os.environ.items() if key != "TETHER_STORE"}
    return subprocess.run(
        [TETHER, *args],
        input=stdin,
        capture_output=True,
        env={**base, **(env or {})},
        timeout=30,
        check=False,
    )


def run_args(
    model: Path | str, workspace: Path, store: str, *extra: str, prompt: str = "do the task"
) -> list[str]:
    """The arguments of ``tether run --json`` on the scripted model file ``model``."""
    return [
        "run",
        "--model",
        f"scripted:{model}",
        "--workspace",
        str(workspace),
        "--store",
        store,
        "--json",
        *extra,
        prompt,
    ]


def run_argv(tmp_path: Path, model: Path, *extra: str) -> list[str]:
    """The argv of ``tether run`` in text mode (for a terminal the caller gives it) over
    ``tmp_path / "ws"`` and a SQLite store there, on ``model``."""
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    return [
        TETHER,
        "run",
        "--model",
        f"scripted:{model}",
        "--workspace",
        str(workspace),
        "--store",
        f"sqlite:///{tmp_path / 's.db'}",
        *extra,
        "go",
    ]
