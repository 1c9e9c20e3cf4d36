"""The collector's pace while a harness is open (``tether/_collector_pace.py``): raised from
CPython's defaults while any harness is open, put back when the last one closes, and never
changed where the process chose its own thresholds."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from script_support import script
from tether import Harness
from tether._collector_pace import DEFAULT_THRESHOLDS, YOUNG_THRESHOLD, collector_paced

PACED = (YOUNG_THRESHOLD, *DEFAULT_THRESHOLDS[1:])


@pytest.fixture(autouse=True)
def thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(*DEFAULT_THRESHOLDS)
    yield
    gc.set_threshold(*before)


async def test_a_harness_paces_the_collector_while_it_is_open(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    model = script(tmp_path / "script.json", [{"text": "done"}])
    async with Harness.open(workspace=workspace, model=f"scripted:{model}", store="memory://"):
        assert gc.get_threshold() == PACED
        async with Harness.open(workspace=workspace, model=f"scripted:{model}", store="memory://"):
            assert gc.get_threshold() == PACED
        assert gc.get_threshold() == PACED  # one harness is still open
    assert gc.get_threshold() == DEFAULT_THRESHOLDS


def test_thresholds_the_process_chose_are_left_as_they_are() -> None:
    gc.set_threshold(500, 5, 5)
    with collector_paced():
        assert gc.get_threshold() == (500, 5, 5)
    assert gc.get_threshold() == (500, 5, 5)
    # Chosen while a harness is open: kept when it closes.
    gc.set_threshold(*DEFAULT_THRESHOLDS)
    with collector_paced():
        assert gc.get_threshold() == PACED
        gc.set_threshold(2000, 10, 10)
    assert gc.get_threshold() == (2000, 10, 10)


def test_a_failing_block_puts_the_defaults_back() -> None:
    with pytest.raises(RuntimeError), collector_paced():
        assert gc.get_threshold() == PACED
        raise RuntimeError("the harness failed")
    assert gc.get_threshold() == DEFAULT_THRESHOLDS
