"""A load hands what it decoded to the collector's oldest generation (decision 0062).

Counted, not timed: no collection traverses the loaded events on their way there, and a load
never thaws objects the process froze itself."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tether.session.persistence import JsonlPersistence, Persistence, SqlitePersistence
from tether.testing import dicts, header, titles

BACKENDS: dict[str, Callable[[Path], Persistence]] = {
    "sqlite": lambda d: SqlitePersistence(d / "store.db"),
    "jsonl": lambda d: JsonlPersistence(d / "sessions"),
}


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """The generation of every collection while the test runs."""
    seen: list[int] = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.collect()
    gc.callbacks.append(note)
    try:
        yield seen
    finally:
        gc.callbacks.remove(note)


@pytest.mark.parametrize("backend", sorted(BACKENDS))
async def test_loaded_events_reach_the_oldest_generation_untraversed(
    tmp_path: Path, backend: str, collections: list[int]
) -> None:
    writer = BACKENDS[backend](tmp_path)
    events = titles(0, 3000)
    await writer.create(header())
    await writer.append("s-1", events)
    await writer.close()
    del events
    reader = BACKENDS[backend](tmp_path)
    try:
        await reader.list()
        collections.clear()
        loaded = await reader.load("s-1")
        # Thousands of containers were made: without the hand-off the first allocation
        # after the pause would collect all of them in the youngest generation.
        assert gc.get_count()[0] < gc.get_threshold()[0]
        oldest = {id(o) for o in gc.get_objects(generation=2)}
        assert id(loaded.events[0]) in oldest and id(loaded.events[-1].data) in oldest
        assert collections == []
        assert dicts(loaded.events) == dicts(titles(0, 3000))
    finally:
        await reader.close()


async def test_a_load_thaws_nothing_the_process_froze(tmp_path: Path) -> None:
    store = SqlitePersistence(tmp_path / "store.db")
    try:
        await store.create(header())
        await store.append("s-1", titles(0, 3000))
        kept: list[object] = []  # tracked, and frozen with everything else
        gc.freeze()
        try:
            loaded = await store.load("s-1")
            generations = {id(o) for o in gc.get_objects()}  # all but the frozen
            assert id(kept) not in generations
            assert id(loaded.events[0]) in generations  # left where it was made
            assert len(loaded.events) == 3000
        finally:
            gc.unfreeze()
    finally:
        await store.close()
