"""What is specific to the JSONL backend: the on-disk layout and the torn-line rules."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tether.session import Event
from tether.session.persistence import (
    CorruptLogError,
    JsonlPersistence,
    SeqConflictError,
    SessionExistsError,
)
from tether.session.persistence._jsonl import LOCK_NAME, LOG_NAME, escape_id
from tether.testing import T0, closed_turn, dicts, header, make_events, titles


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[JsonlPersistence]:
    backend = JsonlPersistence(tmp_path / "root")
    yield backend
    await backend.close()


def test_escape_id_keeps_safe_characters_and_percent_encodes_the_rest() -> None:
    assert escape_id("session-1_A") == "session-1_A"
    assert escape_id("a/b") == "a%2Fb"
    assert escape_id(".hidden") == "%2Ehidden"
    assert escape_id("..") == "%2E%2E"
    assert escape_id("%") == "%25"
    assert escape_id("é") == "%C3%A9"
    assert escape_id("sp ace") == "sp%20ace"


async def test_layout_is_a_header_line_then_one_event_per_line(
    store: JsonlPersistence,
) -> None:
    events = closed_turn(0)
    await store.create(header("a/b", cwd="/work", delegation_depth=0))
    await store.append("a/b", events[:4])
    await store.append("a/b", events[4:])
    path = store.root / "a%2Fb" / LOG_NAME
    assert store.log_path("a/b") == path
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    assert json.loads(lines[0]) == {
        "type": "session",
        "version": 0,
        "id": "a/b",
        "created_at": T0,
        "cwd": "/work",
        "delegation_depth": 0,
    }
    assert lines[0].decode() == json.dumps(
        header("a/b", cwd="/work").to_dict(), separators=(",", ":")
    )
    assert [line.decode() for line in lines[1:-1]] == [event.to_json() for event in events]
    assert sorted(os.listdir(store.root / "a%2Fb")) == sorted([LOCK_NAME, LOG_NAME])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_lines_match_to_json_for_unicode_payloads(store: JsonlPersistence) -> None:
    event = Event.make(
        "user/message",
        0,
        T0,
        {"content": 'grüße 世界 🧪 \u0000\n"q"', "nested": {"a": [1.5, None, True]}},
        surface_op={"op": "replace", "start": 0, "end": 2},
    )
    await store.create(header())
    await store.append("s-1", [event])
    line = store.log_path("s-1").read_bytes().split(b"\n")[1]
    assert line == event.to_json().encode("utf-8")


async def test_creation_leaves_no_staging_directory(store: JsonlPersistence) -> None:
    await store.create(header())
    with pytest.raises(SessionExistsError):
        await store.create(header())
    assert sorted(os.listdir(store.root)) == ["s-1"]


async def test_list_ignores_staging_directories_and_strays(store: JsonlPersistence) -> None:
    await store.create(header())
    (store.root / ".tmp-crashed").mkdir()
    (store.root / ".tmp-crashed" / LOG_NAME).write_text("garbage")
    (store.root / "empty-dir").mkdir()
    (store.root / "stray.txt").write_text("x")
    assert await store.list() == [header()]


async def test_list_on_a_missing_root_is_empty(tmp_path: Path) -> None:
    backend = JsonlPersistence(tmp_path / "never-created")
    try:
        assert await backend.list() == []
        assert not (tmp_path / "never-created").exists()
    finally:
        await backend.close()


async def test_an_unterminated_final_line_is_torn_even_if_it_parses(
    store: JsonlPersistence,
) -> None:
    events = titles(0, 3)
    await store.create(header())
    await store.append("s-1", events)
    with open(store.log_path("s-1"), "ab") as file:
        file.write(
            make_events(3, ("session/title", {"title": "never acknowledged"}))[0].to_json().encode()
        )
    before = store.log_path("s-1").read_bytes()
    inspected = await store.inspect("s-1")
    assert inspected.repair.dropped_tail == 1
    assert store.log_path("s-1").read_bytes() == before
    loaded = await store.load("s-1")
    assert dicts(loaded.events) == dicts(events)
    assert store.log_path("s-1").read_bytes() == before[: before.rindex(b"\n") + 1]


async def test_several_trailing_damaged_lines_are_all_dropped(store: JsonlPersistence) -> None:
    events = titles(0, 3)
    await store.create(header())
    await store.append("s-1", events)
    with open(store.log_path("s-1"), "ab") as file:
        file.write(b'{"type":"session/title","seq":3,"ti\n\n{"broken\n{"half')
    loaded = await store.load("s-1")
    assert loaded.repair.dropped_tail == 4
    assert dicts(loaded.events) == dicts(events)
    await store.append("s-1", titles(3, 1))
    assert len((await store.load("s-1")).events) == 4


async def test_torn_lines_after_multibyte_text_are_cut_at_their_first_byte(
    store: JsonlPersistence,
) -> None:
    # Kept lines whose characters take several bytes each, then damaged lines, one of them not
    # UTF-8 at all (so the lines are judged one by one): the file is cut where the kept end.
    events = make_events(0, *[("session/title", {"title": "été 🧪 世界"})] * 3)
    await store.create(header())
    await store.append("s-1", events)
    kept = store.log_path("s-1").read_bytes()
    for tail in (b'{"broken\n{"half', b'{"t\xc3":\xff}\n{"broken\n', b"\xe4\xb8\n"):
        with open(store.log_path("s-1"), "ab") as file:
            file.write(tail)
        loaded = await store.load("s-1")
        assert loaded.repair.dropped_tail == tail.count(b"\n") + (not tail.endswith(b"\n"))
        assert dicts(loaded.events) == dicts(events)
        assert store.log_path("s-1").read_bytes() == kept


async def test_a_line_that_is_not_utf8_before_intact_ones_is_corruption(
    store: JsonlPersistence,
) -> None:
    await store.create(header())
    await store.append("s-1", make_events(0, *[("session/title", {"title": "é"})] * 4))
    path = store.log_path("s-1")
    lines = path.read_bytes().split(b"\n")
    lines[2] = lines[2].replace("é".encode(), b"\xe9")
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(CorruptLogError, match=r"line 3 is damaged \('utf-8' codec .* line 4"):
        await store.load("s-1")


async def test_a_complete_line_with_the_wrong_seq_is_corruption(store: JsonlPersistence) -> None:
    await store.create(header())
    await store.append("s-1", titles(0, 3))
    with open(store.log_path("s-1"), "ab") as file:
        file.write(titles(7, 1)[0].to_json().encode() + b"\n")
    with pytest.raises(CorruptLogError, match=r"line 5: expected seq 3, found seq 7"):
        await store.load("s-1")
    with pytest.raises(CorruptLogError):
        await store.append("s-1", titles(3, 1))


async def test_damage_names_the_line(store: JsonlPersistence) -> None:
    await store.create(header())
    await store.append("s-1", titles(0, 5))
    path = store.log_path("s-1")
    lines = path.read_bytes().split(b"\n")
    lines[3] = b"not json"
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(CorruptLogError, match=r"session 's-1': line 4 is damaged .* line 5"):
        await store.inspect("s-1")


async def test_a_torn_header_is_corruption(store: JsonlPersistence) -> None:
    await store.create(header())
    store.log_path("s-1").write_bytes(b'{"type":"session","ver')
    with pytest.raises(CorruptLogError, match="header line is incomplete"):
        await store.load("s-1")
    with pytest.raises(CorruptLogError, match="header line is incomplete"):
        await store.list()


async def test_a_header_for_another_id_is_corruption(store: JsonlPersistence) -> None:
    await store.create(header("a"))
    await store.create(header("b"))
    store.log_path("b").write_bytes(store.log_path("a").read_bytes())
    with pytest.raises(CorruptLogError, match="header names session 'a'"):
        await store.load("b")


async def test_appends_revalidate_after_another_writer(tmp_path: Path) -> None:
    first = JsonlPersistence(tmp_path / "root")
    second = JsonlPersistence(tmp_path / "root")
    try:
        await first.create(header())
        await first.append("s-1", titles(0, 2))
        await second.append("s-1", titles(2, 2))
        with pytest.raises(SeqConflictError, match="starts at seq 2 but 4 events are stored"):
            await first.append("s-1", titles(2, 1))
        await first.append("s-1", titles(4, 1))
        await second.append("s-1", titles(5, 1))
        assert dicts((await first.load("s-1")).events) == dicts(titles(0, 6))
    finally:
        await first.close()
        await second.close()


async def test_inspect_without_a_lock_file_creates_none(store: JsonlPersistence) -> None:
    await store.create(header())
    await store.append("s-1", titles(0, 2))
    (store.session_dir("s-1") / LOCK_NAME).unlink()
    assert len((await store.inspect("s-1")).events) == 2
    assert not (store.session_dir("s-1") / LOCK_NAME).exists()
    await store.append("s-1", titles(2, 1))
    assert (store.session_dir("s-1") / LOCK_NAME).exists()
