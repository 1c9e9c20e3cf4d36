"""Fixtures of the end-to-end tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """An empty workspace, by its canonical path (what messages name)."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return Path(os.path.realpath(workspace))
