"""Store URLs: ``open_persistence`` and ``default_store_url``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.errors import TetherError
from tether.session._store_files import store_files
from tether.session.persistence import (
    JsonlPersistence,
    MemoryPersistence,
    PersistenceError,
    SqlitePersistence,
    default_store_url,
    open_persistence,
)
from tether.session.persistence._factory import (
    InvalidStoreUrlError,
    StoreInMemoryError,
    sqlite_url,
    store_location,
)
from tether.testing import header


async def test_sqlite_url_opens_the_sqlite_backend(tmp_path: Path) -> None:
    backend = open_persistence(f"sqlite:///{tmp_path}/store.db")
    assert isinstance(backend, SqlitePersistence)
    assert backend.path == f"{tmp_path}/store.db"
    assert backend.synchronous == "FULL"
    try:
        await backend.create(header())
    finally:
        await backend.close()
    assert (tmp_path / "store.db").is_file()


async def test_jsonl_url_opens_the_jsonl_backend(tmp_path: Path) -> None:
    backend = open_persistence(f"jsonl://{tmp_path}/logs")
    assert isinstance(backend, JsonlPersistence)
    assert backend.root == tmp_path / "logs"
    try:
        await backend.create(header())
    finally:
        await backend.close()
    assert (tmp_path / "logs" / "s-1" / "session.jsonl").is_file()


@pytest.mark.parametrize("spelling", ["rel.db", "./rel.db", "sub/../rel.db"])
async def test_three_slashes_name_a_path_relative_to_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{spelling}"
    backend = open_persistence(url)
    assert isinstance(backend, SqlitePersistence)
    assert backend.path == str(tmp_path / "rel.db")
    assert store_location(url) == ("sqlite", tmp_path / "rel.db")
    try:
        await backend.create(header())
    finally:
        await backend.close()
    assert (tmp_path / "rel.db").is_file()


def test_four_slashes_name_an_absolute_path_and_the_default_store_uses_them(
    tmp_path: Path,
) -> None:
    assert store_location("sqlite:////srv/t.db") == ("sqlite", Path("/srv/t.db"))
    url = default_store_url({"XDG_DATA_HOME": str(tmp_path)})
    assert url == f"sqlite:///{tmp_path}/tether/tether.db"
    assert store_location(url) == ("sqlite", tmp_path / "tether" / "tether.db")
    assert sqlite_url(tmp_path / "a b.db") == f"sqlite:///{tmp_path}/a%20b.db"


def test_percent_escapes_in_the_path_are_decoded() -> None:
    backend = open_persistence("sqlite:////tmp/my%20store/t.db")
    assert isinstance(backend, SqlitePersistence)
    assert backend.path == "/tmp/my store/t.db"


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("", "not a URL"),
        ("/abs/store.db", "not a URL"),
        ("postgresql://localhost/db", "unknown scheme 'postgresql'"),
        (
            "sqlite://relative/store.db",
            "three slashes must follow the scheme (four for an absolute path)",
        ),
        ("sqlite://", "three slashes must follow the scheme (four for an absolute path)"),
        ("sqlite:///", "the path is empty"),
        ("sqlite:////", "the path is empty"),
        ("jsonl:///%2F", "the path is empty"),
        ("jsonl:relative", "not a URL"),
        ("sqlite:////tmp/x.db?mode=ro", "query strings and fragments are not supported"),
        ("memory://x", "memory:// takes no path (each one is a new, empty store)"),
    ],
)
def test_bad_urls_name_the_accepted_forms(url: str, problem: str) -> None:
    with pytest.raises(InvalidStoreUrlError) as caught:
        open_persistence(url)
    assert isinstance(caught.value, TetherError)
    assert caught.value.code == "INVALID_STORE_URL"
    assert str(caught.value) == (
        f"invalid store URL {url!r}: {problem}; expected one of "
        "sqlite:////ABS/PATH.db, sqlite:///REL/PATH.db, jsonl:///ABS/DIR, memory://"
    )


async def test_memory_url_opens_a_new_store_in_this_process_and_has_no_location() -> None:
    first, second = open_persistence("memory://"), open_persistence("memory://")
    assert isinstance(first, MemoryPersistence) and isinstance(second, MemoryPersistence)
    await first.create(header())
    assert [h.id for h in await first.list()] == ["s-1"]
    assert await second.list() == []  # each URL opens its own
    with pytest.raises(StoreInMemoryError) as caught:
        store_location("memory://")
    assert caught.value.code == "STORE_IN_MEMORY"
    assert str(caught.value) == (
        "the memory:// store keeps sessions in the memory of the process that runs them, so "
        "no other process can read, answer or lease them; use a sqlite:// or jsonl:// store "
        "for this"
    )
    assert store_files("memory://") == ()  # nothing on disk for the sandbox to hide
    await first.close()
    with pytest.raises(PersistenceError, match="the in-memory store is closed"):
        await first.list()


def test_tether_store_wins(tmp_path: Path) -> None:
    env = {"TETHER_STORE": "jsonl:///srv/logs", "XDG_DATA_HOME": str(tmp_path)}
    assert default_store_url(env) == "jsonl:///srv/logs"
    assert not (tmp_path / "tether").exists()


def test_default_is_sqlite_in_xdg_data_home(tmp_path: Path) -> None:
    url = default_store_url({"XDG_DATA_HOME": str(tmp_path / "data"), "TETHER_STORE": ""})
    assert url == f"sqlite:///{tmp_path}/data/tether/tether.db"
    assert (tmp_path / "data" / "tether").is_dir()
    assert isinstance(open_persistence(url), SqlitePersistence)


def test_default_falls_back_to_home_local_share(tmp_path: Path) -> None:
    for env in ({"HOME": str(tmp_path)}, {"HOME": str(tmp_path), "XDG_DATA_HOME": "relative"}):
        assert default_store_url(env) == f"sqlite:///{tmp_path}/.local/share/tether/tether.db"
    assert (tmp_path / ".local" / "share" / "tether").is_dir()


def test_default_url_escapes_unusual_paths(tmp_path: Path) -> None:
    url = default_store_url({"XDG_DATA_HOME": str(tmp_path / "a b%c")})
    assert url == f"sqlite:///{tmp_path}/a%20b%25c/tether/tether.db"
    backend = open_persistence(url)
    assert isinstance(backend, SqlitePersistence)
    assert backend.path == f"{tmp_path}/a b%c/tether/tether.db"
