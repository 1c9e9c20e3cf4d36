"""Session leases: real flocks, real processes, real stores."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tether.session import Event, Persistence, SessionHeader, SessionStore
from tether.session._lease import Holder, Leases, LeaseUnavailableError, SessionLiveError
from tether.session.persistence import open_persistence

HOLDER = """
import os, sys, time
from pathlib import Path
from tether.session._lease import Leases

lease = Leases(Path(sys.argv[1])).take(sys.argv[2])
ready_r, ready_w = os.pipe()
child = os.fork() if sys.argv[3] == "fork" else -1  # a worker that outlives the holder
if child == 0:
    os.write(ready_w, b"x")  # the fork hooks have run by now
    time.sleep(30)
    os._exit(0)
if child > 0:
    os.read(ready_r, 1)
print(child, flush=True)
time.sleep(30)
"""


def test_a_lease_is_held_until_released(tmp_path: Path) -> None:
    leases = Leases(tmp_path / "leases")
    assert leases.holder("s-1") is None
    lease = leases.take("s-1")
    assert leases.holder("s-1") == Holder(os.getpid())
    with pytest.raises(SessionLiveError) as err:
        leases.take("s-1")
    assert str(err.value) == f"session 's-1' is live in process {os.getpid()}"
    assert err.value.code == "SESSION_LIVE"
    lease.release()
    lease.release()  # idempotent
    assert leases.holder("s-1") is None
    leases.take("s-1").release()


def test_any_session_id_takes_a_lease_and_names_no_file(tmp_path: Path) -> None:
    leases = Leases(tmp_path / "leases")
    odd = ["../x/.y", "", "s" * 10_000, "\udc80 lone surrogate", "s-1\n"]
    held = [leases.take(session_id) for session_id in odd]
    assert [p.name for p in (tmp_path / "leases").iterdir()] == ["sessions.lock"]
    assert all(leases.holder(session_id) is not None for session_id in odd)
    assert leases.holder("s-1") is None
    for lease in held:
        lease.release()
    assert all(leases.holder(session_id) is None for session_id in odd)


def test_leases_open_nothing_per_session(tmp_path: Path) -> None:
    # The hot path (a new session, its end) costs two fcntl calls: no file is created,
    # written, unlinked or closed per session.
    leases = Leases(tmp_path / "leases")
    leases.take("warm-up").release()
    fds = len(os.listdir("/proc/self/fd"))
    stat = (tmp_path / "leases" / "sessions.lock").stat()
    for index in range(500):
        leases.take(f"s-{index}").release()
    assert len(os.listdir("/proc/self/fd")) == fds
    after = (tmp_path / "leases" / "sessions.lock").stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        stat.st_ino,
        stat.st_size,
        stat.st_mtime_ns,
    )
    assert [p.name for p in (tmp_path / "leases").iterdir()] == ["sessions.lock"]


@pytest.mark.parametrize("fork", ["alone", "fork"])
def test_a_dead_holder_holds_nothing(tmp_path: Path, fork: str) -> None:
    directory = tmp_path / "leases"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(directory), "s-1", fork], stdout=subprocess.PIPE
    )
    assert holder.stdout is not None
    child = int(holder.stdout.readline())
    try:
        assert Leases(directory).holder("s-1") == Holder(holder.pid)
        with pytest.raises(SessionLiveError, match=f"is live in process {holder.pid}$"):
            Leases(directory).take("s-1")
        holder.kill()
        holder.wait()
        # However it died, and even with a forked worker still running, the lease is free.
        assert Leases(directory).holder("s-1") is None
        if child > 0:
            os.kill(child, 0)
        Leases(directory).take("s-1").release()
    finally:
        holder.kill()
        holder.wait()
        if child > 0:
            os.kill(child, signal.SIGKILL)


TAKER = """
import sys
from pathlib import Path
from tether.session._lease import Leases, SessionLiveError
try:
    Leases(Path(sys.argv[1])).take(sys.argv[2]).release()
except SessionLiveError as err:
    print(err)
    sys.exit(3)
print("taken")
"""


def test_a_lease_is_exclusive_across_processes(tmp_path: Path) -> None:
    leases = Leases(tmp_path / "leases")

    def other_process(session_id: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", TAKER, str(tmp_path / "leases"), session_id],
            capture_output=True,
            text=True,
            timeout=60,
        )

    lease = leases.take("s-1")
    refused = other_process("s-1")
    assert (refused.returncode, refused.stdout) == (
        3,
        f"session 's-1' is live in process {os.getpid()}\n",
    )
    assert other_process("s-2").stdout == "taken\n"  # another session is free
    lease.release()
    assert other_process("s-1").stdout == "taken\n"


async def test_a_session_is_live_in_one_store_at_a_time(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    first = SessionStore(open_persistence(url), leases=Leases.for_store(url))
    second = SessionStore(open_persistence(url), leases=Leases.for_store(url))
    session = first.create("s-1")
    session.append("turn/start", {"turn": 1})
    await first.flush(session)
    with pytest.raises(SessionLiveError, match="session 's-1' is live in process"):
        await second.open("s-1")
    assert second.get("s-1") is None
    await first.dispose(session)
    reopened = await second.open("s-1")
    assert reopened.events[0].type == "turn/start"
    assert Leases.for_store(url).holder("s-1") is not None
    await second.close()
    assert Leases.for_store(url).holder("s-1") is None
    await first.close()


async def test_a_vetoed_session_gives_its_lease_back(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path / 'store'}"
    store = SessionStore(open_persistence(url), leases=Leases.for_store(url))

    def veto(_session: object) -> None:
        raise RuntimeError("no")

    store.on_created(veto)
    with pytest.raises(RuntimeError):
        store.create("s-1")
    assert Leases.for_store(url).holder("s-1") is None
    await asyncio.sleep(0)
    await store.close()


async def test_a_refused_resume_writes_nothing_to_the_running_session(tmp_path: Path) -> None:
    # The holder is inside a turn: a load would "repair" it. A refused open must not load.
    url = f"sqlite:///{tmp_path / 's.db'}"
    running = SessionStore(open_persistence(url), leases=Leases.for_store(url))
    other = SessionStore(open_persistence(url), leases=Leases.for_store(url))
    session = running.create("s-1")
    session.append("turn/start", {"turn": 1})
    await running.flush(session)
    with pytest.raises(SessionLiveError):
        await other.open("s-1")
    session.append("turn/end", {"turn": 1, "reason": "completed"})
    await running.flush(session)  # no SEQ_CONFLICT: nothing was appended behind its back
    stored = await other.inspect("s-1")
    assert [e.type for e in stored.events] == ["turn/start", "turn/end"]
    await running.close()
    await other.close()


def test_checking_a_lease_never_makes_taking_it_fail(tmp_path: Path) -> None:
    leases = Leases(tmp_path / "leases")
    done = threading.Event()

    def check() -> None:
        while not done.is_set():
            leases.holder("s-1")

    checker = threading.Thread(target=check)
    checker.start()
    try:
        for _ in range(300):
            leases.take("s-1").release()
    finally:
        done.set()
        checker.join()


def test_one_store_one_lease_directory_however_it_is_spelled(tmp_path: Path) -> None:
    (tmp_path / "real.db").touch()
    (tmp_path / "link.db").symlink_to(tmp_path / "real.db")
    real = Leases.for_store(f"sqlite:///{tmp_path / 'real.db'}")
    link = Leases.for_store(f"sqlite:///{tmp_path / 'link.db'}")
    assert real.directory == link.directory == tmp_path / "real.db.leases"


def test_releasing_one_lease_keeps_every_other(tmp_path: Path) -> None:
    first, second = Leases(tmp_path / "leases"), Leases(tmp_path / "leases")
    held = [first.take(f"s-{index}") for index in range(50)]
    lease = first.take("s-x")
    lease.release()
    taken = second.take("s-x")  # another store of this process
    lease.release()  # released twice: the later holder keeps it
    assert second.holder("s-x") == Holder(os.getpid())
    with pytest.raises(SessionLiveError):
        first.take("s-x")
    assert all(second.holder(f"s-{index}") is not None for index in range(50))
    for each in held:
        each.release()
    taken.release()
    assert first.holder("s-x") is None


def test_an_unusable_lease_directory_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "leases").write_text("not a directory")
    with pytest.raises(LeaseUnavailableError) as err:
        Leases(tmp_path / "leases").take("s-1")
    assert err.value.code == "LEASE_UNAVAILABLE"
    assert str(err.value).startswith(
        f"cannot take the lease of session 's-1' in {tmp_path / 'leases' / 'sessions.lock'}: "
    )


class GatedAppends:
    """The real SQLite backend, with appends held at a gate (a slow disk)."""

    def __init__(self, inner: Persistence) -> None:
        self.inner = inner
        self.gate = asyncio.Event()

    async def append(self, session_id: str, events: Sequence[Event]) -> None:
        await self.gate.wait()
        await self.inner.append(session_id, events)

    async def create_with_events(self, header: SessionHeader, events: Sequence[Event]) -> None:
        # A new session's first write (its header and first events in one commit).
        await self.gate.wait()
        await self.inner.create_with_events(header, events)  # type: ignore[attr-defined]

    async def append_deferred(self, session_id: str, events: Sequence[Event]) -> None:
        await self.gate.wait()
        await self.inner.append_deferred(session_id, events)  # type: ignore[attr-defined]

    async def create_deferred(self, header: SessionHeader, events: Sequence[Event]) -> None:
        await self.gate.wait()
        await self.inner.create_deferred(header, events)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_a_cancelled_dispose_keeps_the_lease_until_the_write_ends(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    slow = GatedAppends(open_persistence(url))
    store = SessionStore(slow, leases=Leases.for_store(url))  # type: ignore[arg-type]
    session = store.create("s-1")
    session.append("turn/start", {"turn": 1})
    disposing = asyncio.ensure_future(store.dispose(session))
    await asyncio.sleep(0.01)
    disposing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await disposing
    # Detached, but its write is still on the way: another process must not start yet.
    assert Leases.for_store(url).holder("s-1") is not None
    slow.gate.set()
    for _ in range(100):
        if Leases.for_store(url).holder("s-1") is None:
            break
        await asyncio.sleep(0.01)
    assert Leases.for_store(url).holder("s-1") is None
    stored = await slow.inner.inspect("s-1")
    written = stored.events[: len(stored.events) - len(stored.repair.synthesized)]
    assert [e.type for e in written] == ["turn/start"]  # the write did finish
    await slow.inner.close()
