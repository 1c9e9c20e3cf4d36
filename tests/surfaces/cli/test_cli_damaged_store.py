"""A damaged SQLite file and a full disk, through the real ``tether`` process: one line with a
stable code that names the store and says what to do, never a traceback; ``tether sessions
fsck --salvage DEST`` copies every session that can still be read into a new store."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_stores import StoreRef, make_ref, populate

from cli_support import TETHER
from cli_support import tether_bytes as tether
from script_support import script
from tether.session import SessionHeader, SessionMeta, SessionStore
from tether.session.persistence import open_persistence
from tether.surfaces.cli._common import iso_time

pytestmark = pytest.mark.timeout(60)

PAGE = 4096
IDS = ("s-a", "s-b", "s-c")


def add_three(store: SessionStore) -> None:
    for session_id in IDS:
        session = store.create(session_id, meta=SessionMeta(cwd="/work/project"))
        marker = session_id[-1].upper() * 20_000  # overflow pages of this session only
        session.append("turn/start", {"turn": 0})
        session.append("user/message", {"content": marker, "source": "user"}, surface_op="append")
        session.append("turn/end", {"turn": 0, "reason": "completed"})


@pytest.fixture
def damaged(tmp_path: Path) -> StoreRef:
    """Three sessions; the overflow pages that hold only s-b's payload overwritten with
    garbage (the leaf pages the sessions share stay intact)."""
    ref = make_ref("sqlite", tmp_path / "a")
    populate(ref, add_three)
    data = bytearray(ref.path.read_bytes())
    hit = [p for p in range(0, len(data), PAGE) if data[p : p + PAGE].count(b"B") > PAGE - 64]
    assert hit
    for start in hit:
        data[start : start + PAGE] = b"\xde\xad" * (PAGE // 2)
    ref.path.write_bytes(bytes(data))
    return ref


def hint(ref: StoreRef) -> str:
    return (
        "Copy what can be read into a new store with: tether sessions fsck --salvage "
        f"sqlite:////NEW/PATH.db --store sqlite:///{ref.path}"
    )


def test_a_damaged_file_names_the_store_and_the_sessions_still_readable(
    damaged: StoreRef,
) -> None:
    shown = tether("sessions", "show", "s-b", "--store", damaged.url)
    assert shown.returncode == 1
    assert shown.stdout == b""
    assert shown.stderr.decode() == (
        f"tether: STORE_DAMAGED: SQLite store {damaged.path} is damaged (database disk image is "
        f"malformed); 2 of 3 sessions can still be read (s-a, s-c). {hint(damaged)}\n"
    )
    readable = tether("sessions", "show", "s-a", "--store", damaged.url, "--json")
    assert readable.returncode == 0, readable.stderr


def test_salvage_copies_every_readable_session_into_a_new_store(
    damaged: StoreRef, tmp_path: Path
) -> None:
    dest = f"sqlite:///{tmp_path / 'new.db'}"
    salvaged = tether("sessions", "fsck", "--salvage", dest, "--store", damaged.url)
    assert salvaged.returncode == 1
    assert salvaged.stderr == b""
    assert salvaged.stdout.decode() == (
        "copied s-a (3 events)\n"
        "copied s-c (3 events)\n"
        "unreadable s-b: DatabaseError: database disk image is malformed\n"
        f"salvaged 2 of 3 sessions into {dest}\n"
    )
    listed = tether("sessions", "list", "--json", "--store", dest)
    assert [h["id"] for h in json.loads(listed.stdout)] == ["s-c", "s-a"]  # newest first
    assert tether("sessions", "fsck", "--store", dest).returncode == 0
    for session_id in ("s-a", "s-c"):
        copy = tether("sessions", "export", session_id, "--store", dest)
        original = tether("sessions", "export", session_id, "--store", damaged.url)
        assert copy.returncode == original.returncode == 0
        assert copy.stdout == original.stdout
    again = tether("sessions", "fsck", "--salvage", dest, "--store", damaged.url)
    assert again.returncode == 1
    assert again.stderr.decode() == (
        f"tether: SALVAGE_TARGET: --salvage {dest}: {tmp_path / 'new.db'} exists already; name "
        "a store that does not exist\n"
    )


@pytest.mark.parametrize(
    ("damage", "reason"),
    [("garbage", "file is not a database"), ("truncated", "database disk image is malformed")],
)
def test_a_replaced_or_truncated_file_says_nothing_can_be_read(
    tmp_path: Path, damage: str, reason: str
) -> None:
    ref = make_ref("sqlite", tmp_path / "a")
    populate(ref, add_three)
    if damage == "garbage":
        ref.path.write_bytes(b"\xde\xad\xbe\xef" * 4096)
    else:
        with open(ref.path, "r+b") as handle:
            handle.truncate(3 * PAGE)
    listed = tether("sessions", "list", "--store", ref.url)
    assert listed.returncode == 1
    assert b"Traceback" not in listed.stderr
    assert listed.stderr.decode() == (
        f"tether: STORE_DAMAGED: SQLite store {ref.path} is damaged ({reason}); no session can "
        f"be read from it. {hint(ref)}\n"
    )
    checked = tether("sessions", "fsck", "--store", ref.url)
    assert checked.returncode == 1
    assert checked.stderr == listed.stderr


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs (root only)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_a_full_disk_is_one_persistence_error_with_the_space_needed(
    small_disk: Path, tmp_path: Path, kind: str
) -> None:
    model = script(tmp_path / "script.json", [{"text": "done"}])
    (tmp_path / "ws").mkdir()
    if kind == "sqlite":
        store, name, free_in = small_disk / "t.db", "SQLite", small_disk
        url = f"sqlite:///{store}"
    else:
        store, name, free_in = small_disk / "j", "JSONL", small_disk / "j"
        url = f"jsonl://{store}"
    ran = subprocess.run(
        [TETHER, "run", "--model", f"scripted:{model}", "--workspace", str(tmp_path / "ws"),
         "--store", url],
        input="x" * 1_500_000, capture_output=True, text=True, timeout=50, check=False,
    )  # fmt: skip
    assert ran.returncode == 1
    assert "Traceback" not in ran.stderr
    pattern = (
        r"tether: PERSISTENCE_ERROR: session '[0-9a-f-]{36}' could not be stored: "
        + re.escape(f"{name} store {store}")
        + r": the disk is full \(\d+(\.\d)? (bytes|KiB|MiB) free in "
        + re.escape(str(free_in))
        + r"\); this write needs about \d\.\d MiB\. Free some space, then run again: the "
        r"events stored so far are kept"
    )
    assert [re.fullmatch(pattern, line) is not None for line in ran.stderr.splitlines()] == [
        True
    ], ran.stderr


@pytest.mark.parametrize("extra", [("--repair",), ("s-a",), ("--json",)])
def test_salvage_takes_no_other_fsck_option(
    damaged: StoreRef, tmp_path: Path, extra: tuple[str, ...]
) -> None:
    dest = f"sqlite:///{tmp_path / 'new.db'}"
    ran = tether("sessions", "fsck", *extra, "--salvage", dest, "--store", damaged.url)
    assert ran.returncode == 2
    assert ran.stderr == (
        b"tether: fsck: --salvage copies every readable session; it takes no ID, --repair or "
        b"--json\n"
    )
    assert not (tmp_path / "new.db").exists()


def test_salvage_leaves_out_a_session_whose_scope_was_never_stored(tmp_path: Path) -> None:
    """A header without events (an older tether's crash between the two writes) resumes with
    the default scope, so salvage does not copy it; a DEST that is a dangling link is refused
    rather than written through."""
    ref = make_ref("sqlite", tmp_path / "a")
    populate(ref, add_three)

    async def add_bare() -> None:
        persistence = open_persistence(ref.url)
        try:
            await persistence.create(SessionHeader(id="s-bare", created_at=1))
        finally:
            await persistence.close()

    asyncio.run(add_bare())
    elsewhere = tmp_path / "elsewhere.db"
    (tmp_path / "link.db").symlink_to(elsewhere)
    linked = f"sqlite:///{tmp_path / 'link.db'}"
    refused = tether("sessions", "fsck", "--salvage", linked, "--store", ref.url)
    assert refused.returncode == 1
    assert refused.stderr.decode() == (
        f"tether: SALVAGE_TARGET: --salvage {linked}: {tmp_path / 'link.db'} exists already; "
        "name a store that does not exist\n"
    )
    assert not elsewhere.exists()
    dest = f"sqlite:///{tmp_path / 'new.db'}"
    salvaged = tether("sessions", "fsck", "--salvage", dest, "--store", ref.url)
    assert salvaged.returncode == 1
    assert salvaged.stdout.decode() == (
        "copied s-a (3 events)\n"
        "copied s-b (3 events)\n"
        "copied s-c (3 events)\n"
        "unreadable s-bare: no events (its scope was never stored, so it is not copied)\n"
        f"salvaged 3 of 4 sessions into {dest}\n"
    )


def test_a_header_time_out_of_range_is_shown_not_raised() -> None:
    assert iso_time(1_700_000_000_000) == "2023-11-14T22:13:20.000Z"
    assert iso_time(2**63 - 1) == f"{2**63 - 1} ms (not a time)"
