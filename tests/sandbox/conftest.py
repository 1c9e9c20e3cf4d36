"""Fixtures every sandbox test uses: a host layout, and secrets in the environment."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_support import HOST_BASE, SECRET_ENV, Host, make_host


@pytest.fixture
def host() -> Iterator[Host]:
    root = tempfile.mkdtemp(prefix="tether-sandbox-", dir=HOST_BASE)
    try:
        yield make_host(Path(root))
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(autouse=True)
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Secrets a command must never see; and no backend turned off by the caller's shell."""
    monkeypatch.delenv("TETHER_SANDBOX_DISABLE", raising=False)
    for key, value in SECRET_ENV.items():
        monkeypatch.setenv(key, value)
