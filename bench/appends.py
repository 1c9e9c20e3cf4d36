"""Appends per second through the persistence API, single-event and batched, every backend.

    .venv/bin/python bench/appends.py [--runs 5] [--single 2000] [--batches 100]

Every ``append`` is a durable commit (SQLite: a transaction, fsynced under
``synchronous=FULL``; JSONL: a write and an fsync). ``single, deferred`` appends one event at
a time with ``append_deferred`` (``DefersSync``: committed, synced later, as the session store's
write-behind commits), where the backend has it. Events are built before timing starts: the
figures are the backend's cost (encoding, the write, the commit), not ``Session.append``'s
validation. Each run uses a fresh store in a temporary directory; the table shows the median
and range over runs.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tether.session import Event, SessionHeader
from tether.session.persistence import JsonlPersistence, Persistence, SqlitePersistence

T0 = 1_700_000_000_000


def realistic_events(count: int, start: int = 0) -> list[Event]:
    """Closed turns of ten events each, payloads of typical size (about 300 bytes mean)."""
    out: list[Event] = []
    seq = start
    turn = 0
    while len(out) < count:
        turn += 1
        call = f"call_{turn:08d}"
        for kind, data, surface in (
            ("turn/start", {"turn": turn}, None),
            (
                "user/message",
                {"content": "Please fix the failing test in " * 4, "source": "user"},
                "append",
            ),
            ("step/start", {"step": 1}, None),
            (
                "tool/call",
                {
                    "call_id": call,
                    "name": "bash",
                    "arguments": '{"command": "pytest -x tests/unit"}',
                },
                None,
            ),
            ("approval/asked", {"id": f"ap_{turn}", "tool_name": "bash", "call_id": call}, None),
            ("approval/decided", {"id": f"ap_{turn}", "outcome": "allowed-once"}, None),
            (
                "tool/result",
                {
                    "call_id": call,
                    "name": "bash",
                    "content": "collected 12 items\n" + "." * 600 + "\n12 passed",
                    "is_error": False,
                },
                "append",
            ),
            ("step/end", {"step": 1}, None),
            ("assistant/message", {"content": "The test now passes. " * 10}, "append"),
            ("turn/end", {"turn": turn, "reason": "completed"}, None),
        ):
            if len(out) == count:
                break
            out.append(Event.make(kind, seq, T0 + seq, data, surface_op=surface))
            seq += 1
    return out


BACKENDS: dict[str, Callable[[Path], Persistence]] = {
    "sqlite (FULL)": lambda d: SqlitePersistence(d / "store.db"),
    "sqlite (NORMAL)": lambda d: SqlitePersistence(d / "store.db", synchronous="NORMAL"),
    "jsonl": lambda d: JsonlPersistence(d / "sessions"),
}


async def one_run(
    make: Callable[[Path], Persistence], events: list[Event], batch: int, deferred: bool
) -> float:
    """Events per second appending ``events`` in batches of ``batch`` to a fresh store."""
    with tempfile.TemporaryDirectory(prefix="tether-bench-") as tmp:
        backend = make(Path(tmp))
        append = getattr(backend, "append_deferred", None) if deferred else None
        try:
            await backend.create(SessionHeader("bench", T0))
            await backend.append("bench", events[:1])  # open the connection/files untimed
            started = time.perf_counter()
            for index in range(1, len(events), batch):
                await (append or backend.append)("bench", events[index : index + batch])
            elapsed = time.perf_counter() - started
        finally:
            await backend.close()
    return (len(events) - 1) / elapsed


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--single", type=int, default=2_000, help="events, one per append")
    parser.add_argument("--batches", type=int, default=100, help="batches of 1000 events")
    args = parser.parse_args()
    single = realistic_events(args.single + 1)
    batched = realistic_events(args.batches * 1000 + 1)
    print(f"{'backend':<16} {'mode':<17} {'events/s (median)':>18} {'min':>10} {'max':>10}")
    modes = (
        ("single", single, 1, False),
        ("single, deferred", single, 1, True),
        ("batch of 1000", batched, 1000, False),
    )
    backends = dict(BACKENDS)
    try:  # imported here, so that load.py (which imports this module) runs on older code
        from tether.session.persistence import MemoryPersistence

        backends["memory"] = lambda d: MemoryPersistence()
    except ImportError:
        pass
    for name, make in backends.items():
        probe = make(Path(tempfile.gettempdir()))  # nothing is opened before a first call
        defers = hasattr(probe, "append_deferred")  # DefersSync
        await probe.close()
        for mode, events, batch, deferred in modes:
            if deferred and not defers:
                continue
            rates = [await one_run(make, events, batch, deferred) for _ in range(args.runs)]
            print(
                f"{name:<16} {mode:<17} {statistics.median(rates):>18,.0f} "
                f"{min(rates):>10,.0f} {max(rates):>10,.0f}"
            )


if __name__ == "__main__":
    asyncio.run(main())
