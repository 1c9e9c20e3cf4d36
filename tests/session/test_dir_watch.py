"""Watching a directory through inotify: names reported as they change, and an ended watch's
instance kept for the next one (closing an instance waits for the kernel), with nothing of the
old watch reaching the new."""

from __future__ import annotations

from pathlib import Path

from tether.session._dir_watch import DirWatch


async def test_names_are_reported_as_they_are_created_and_written(tmp_path: Path) -> None:
    watch = DirWatch.open(tmp_path)
    assert watch is not None
    try:
        (tmp_path / "a.json").write_text("{}")
        (tmp_path / "b").mkdir()
        changed = set(await watch.changed() or [])
        while "b" not in changed:
            changed |= set(await watch.changed() or [])
        assert changed == {"a.json", "b"}
        assert watch.read_now() == []
    finally:
        watch.close()


async def test_an_ended_watch_leaves_its_instance_to_the_next_and_nothing_else(
    tmp_path: Path,
) -> None:
    first_dir, second_dir = tmp_path / "one", tmp_path / "two"
    first_dir.mkdir()
    second_dir.mkdir()
    first = DirWatch.open(first_dir)
    assert first is not None
    instance = first.fileno()
    (first_dir / "unread.json").write_text("{}")  # an event the first watch never reads
    first.close()
    assert first.fileno() == -1
    second = DirWatch.open(second_dir)
    assert second is not None
    try:
        assert second.fileno() == instance  # the same inotify instance, not a new one
        (second_dir / "mine.json").write_text("{}")
        assert set(await second.changed() or []) == {"mine.json"}
    finally:
        second.close()


async def test_a_watched_directory_that_goes_away_is_reported_lost(tmp_path: Path) -> None:
    box = tmp_path / "box"
    box.mkdir()
    watch = DirWatch.open(box)
    assert watch is not None
    try:
        box.rmdir()
        assert await watch.changed() is None  # look at everything: the watch is gone
        assert watch.lost
    finally:
        watch.close()
