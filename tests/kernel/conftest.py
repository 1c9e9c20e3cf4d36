"""Fixtures of the kernel tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from plugin_dist import Distribution, install

from tether.kernel import Context, Runtime


@pytest.fixture
def third_party(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Distribution]:
    """A real third-party distribution of plugins (see :mod:`plugin_dist`)."""
    yield from install(tmp_path, monkeypatch)


@pytest.fixture
def ctx() -> Context:
    """A fresh runtime's root context."""
    return Runtime().root
