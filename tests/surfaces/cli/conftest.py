"""Fixtures: empty real stores of each kind (see :mod:`cli_stores`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_stores import StoreRef, make_ref


@pytest.fixture(params=["sqlite", "jsonl"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreRef:
    """An empty store of each kind."""
    return make_ref(request.param, tmp_path / "a")


@pytest.fixture(params=["sqlite", "jsonl"])
def other_store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreRef:
    """A second empty store of each kind (import targets)."""
    return make_ref(request.param, tmp_path / "b")


@pytest.fixture
def jsonl_store(tmp_path: Path) -> StoreRef:
    """An empty JSONL store (only a JSONL write can be torn)."""
    return make_ref("jsonl", tmp_path / "j")
