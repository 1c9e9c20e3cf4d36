"""Fake sandbox runners for tests: a runner is probed before use, so a fake one that must be
*used* passes the probe first (by running the real bwrap) and only then misbehaves."""

from __future__ import annotations

import shutil
from pathlib import Path


def fake_runner(directory: Path, body: str) -> Path:
    """An executable ``fake-bwrap`` in ``directory`` running the shell ``body``."""
    script = directory / "fake-bwrap"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(0o755)
    return script


def passing_runner(directory: Path, failure: str) -> tuple[Path, Path]:
    """A runner that passes the probe (it runs the real bwrap) and, once the returned
    ``armed`` path exists, runs the shell ``failure`` instead: a runner that breaks after
    it was probed."""
    armed = directory / "armed"
    runner = fake_runner(
        directory, f'if [ -e {armed} ]; then {failure}; fi; exec {shutil.which("bwrap")} "$@"'
    )
    return runner, armed
