"""Fixtures of the end-to-end tests."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """An empty workspace, by its canonical path (what messages name)."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return Path(os.path.realpath(workspace))


@pytest.fixture
def env(tmp_path: Path) -> dict[str, Any]:
    """A run's places: an empty ``workspace``, a SQLite ``store`` URL and the ``tmp`` directory
    (a module whose runs need others defines its own ``env``)."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return {"workspace": workspace, "store": f"sqlite:///{tmp_path / 'store.db'}", "tmp": tmp_path}
