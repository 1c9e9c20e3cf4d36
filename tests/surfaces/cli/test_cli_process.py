"""The installed ``tether`` console script, run as a real process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_stores import CRASHED, DONE, StoreRef, add_standard, make_ref, populate

from cli_support import tether_bytes as tether
from tether import __version__

pytestmark = pytest.mark.timeout(60)


def test_version() -> None:
    result = tether("--version")
    assert result.returncode == 0
    assert result.stdout == f"tether {__version__}\n".encode()


def test_errors_are_one_line_without_a_traceback(store: StoreRef) -> None:
    populate(store, add_standard)
    result = tether("sessions", "show", "nope", "--store", store.url)
    assert result.returncode == 1
    assert result.stdout == b""
    assert result.stderr == b"tether: SESSION_NOT_FOUND: session 'nope' not found\n"


@pytest.mark.parametrize(("source", "target"), [("sqlite", "jsonl"), ("jsonl", "sqlite")])
def test_export_piped_into_import_then_fsck(tmp_path: Path, source: str, target: str) -> None:
    store, other_store = make_ref(source, tmp_path / "a"), make_ref(target, tmp_path / "b")
    populate(store, add_standard)
    # The root's export carries its subagent: one import restores both.
    exported = tether("sessions", "export", DONE, "--store", store.url)
    assert exported.returncode == 0, exported.stderr
    imported = tether("sessions", "import", "-", "--store", other_store.url, stdin=exported.stdout)
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout == f"{DONE}\n".encode()
    # The copy holds the repaired view, so it checks clean; the original still needs repair.
    assert tether("sessions", "fsck", "--store", other_store.url).returncode == 0
    assert tether("sessions", "fsck", "--store", store.url).returncode == 1
    repaired = tether("sessions", "fsck", "--repair", "--json", "--store", store.url)
    assert repaired.returncode == 0, repaired.stderr
    assert json.loads(repaired.stdout)["counts"] == {
        "ok": 1,
        "damaged": 0,
        "repaired": 1,
        "unreadable": 0,
        "live": 0,
    }
    original = tether("sessions", "export", CRASHED, "--store", store.url).stdout
    copy = tether("sessions", "export", CRASHED, "--store", other_store.url).stdout
    assert original == copy


def test_store_from_the_environment(store: StoreRef) -> None:
    populate(store, add_standard)
    result = tether("sessions", "list", "--json", env={"TETHER_STORE": store.url})
    assert result.returncode == 0, result.stderr
    assert [header["id"] for header in json.loads(result.stdout)] == [CRASHED, DONE]


def test_non_ascii_payloads_are_written_as_utf8_whatever_the_locale(store: StoreRef) -> None:
    populate(store, add_standard)
    result = tether(
        "sessions", "export", DONE, "--store", store.url, env={"LC_ALL": "C", "LANG": "C"}
    )
    assert result.returncode == 0, result.stderr
    assert '"content":"héllo"'.encode() in result.stdout
