"""Fixtures of the tool tests."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def ws() -> Iterator[Path]:
    """A workspace ``ROOT/ws`` (with ``src/``) beside an ``ROOT/outside`` that commands must
    not reach. Under /var/tmp: bubblewrap's private /tmp would hide "outside" targets under
    /tmp."""
    root = Path(os.path.realpath(tempfile.mkdtemp(prefix="tether-bash-", dir="/var/tmp")))
    (root / "ws" / "src").mkdir(parents=True)
    (root / "outside").mkdir()
    try:
        yield root / "ws"
    finally:
        shutil.rmtree(root, ignore_errors=True)
