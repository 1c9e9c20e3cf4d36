"""Session leases: real flocks, real processes, real stores."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tether.session import SessionStore
from tether.session.lease import Holder, Leases, SessionLiveError
from tether.session.persistence import open_persistence

HOLDER = """
import os, sys, time
from pathlib import Path
from tether.session.lease import Leases

lease = Leases(Path(sys.argv[1])).take(sys.argv[2])
child = os.fork() if sys.argv[3] == "fork" else -1  # a worker that outlives the holder
if child == 0:
    time.sleep(30)
    os._exit(0)
print(child, flush=True)
time.sleep(30)
"""


def test_a_lease_is_held_until_released(tmp_path: Path) -> None:
    leases = Leases(tmp_path / "leases")
    assert leases.holder("s-1") is None
    lease = leases.take("s-1")
    assert leases.holder("s-1") == Holder(os.getpid(), socket.gethostname())
    with pytest.raises(SessionLiveError) as err:
        leases.take("s-1")
    assert str(err.value) == f"session 's-1' is live in process {os.getpid()}"
    assert err.value.code == "SESSION_LIVE"
    lease.release()
    lease.release()  # idempotent
    assert leases.holder("s-1") is None
    assert not (tmp_path / "leases" / "s-1.lease").exists()
    leases.take("s-1").release()


def test_any_session_id_is_a_safe_file_name(tmp_path: Path) -> None:
    leases = Leases(tmp_path / "leases")
    lease = leases.take("../x/.y")
    assert [p.name for p in (tmp_path / "leases").iterdir()] == ["..%2Fx%2F.y.lease"]
    assert leases.holder("../x/.y") is not None
    lease.release()


@pytest.mark.parametrize("fork", ["alone", "fork"])
def test_a_dead_holder_holds_nothing(tmp_path: Path, fork: str) -> None:
    directory = tmp_path / "leases"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(directory), "s-1", fork], stdout=subprocess.PIPE
    )
    assert holder.stdout is not None
    child = int(holder.stdout.readline())
    try:
        assert Leases(directory).holder("s-1") == Holder(holder.pid, socket.gethostname())
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


async def test_a_session_is_live_in_one_store_at_a_time(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 's.db'}"
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
