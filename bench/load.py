"""Load and replay time for 1k, 10k and 100k-event sessions, both backends.

    .venv/bin/python bench/load.py [--runs 5] [--sizes 1000,10000,100000]

``load`` is ``Persistence.load`` on a fresh handle (nothing cached): read every record, validate
each through ``Event.from_dict``, plan repair. ``replay`` builds the live ``Session`` from the
loaded events (what ``SessionStore.open`` does next). The per-event column shows whether cost
grows linearly: it should stay flat as sessions grow. Median over runs.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tether.session import Session, SessionHeader
from tether.session.persistence import JsonlPersistence, Persistence, SqlitePersistence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from appends import T0, realistic_events

BACKENDS: dict[str, Callable[[Path], Persistence]] = {
    "sqlite": lambda d: SqlitePersistence(d / "store.db"),
    "jsonl": lambda d: JsonlPersistence(d / "sessions"),
}


async def measure(make: Callable[[Path], Persistence], size: int, runs: int) -> tuple[float, float]:
    """Median seconds to load, and to replay, a ``size``-event session."""
    events = realistic_events(size)
    header = SessionHeader("bench", T0)
    with tempfile.TemporaryDirectory(prefix="tether-bench-") as tmp:
        writer = make(Path(tmp))
        await writer.create(header)
        for index in range(0, size, 1000):
            await writer.append("bench", events[index : index + 1000])
        await writer.close()
        loads: list[float] = []
        replays: list[float] = []
        for _ in range(runs):
            backend = make(Path(tmp))
            try:
                await backend.list()  # open the connection untimed
                started = time.perf_counter()
                stored = await backend.load("bench")
                loaded = time.perf_counter()
                Session(stored.header, stored.events)
                replayed = time.perf_counter()
            finally:
                await backend.close()
            assert len(stored.events) == size and not stored.repair.changed
            loads.append(loaded - started)
            replays.append(replayed - loaded)
    return statistics.median(loads), statistics.median(replays)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sizes", default="1000,10000,100000")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    print(
        f"{'backend':<8} {'events':>8} {'load ms':>9} {'µs/event':>9} "
        f"{'replay ms':>10} {'µs/event':>9} {'total ms':>9}"
    )
    for name, make in BACKENDS.items():
        for size in sizes:
            load, replay = await measure(make, size, args.runs)
            print(
                f"{name:<8} {size:>8,} {load * 1e3:>9.1f} {load / size * 1e6:>9.2f} "
                f"{replay * 1e3:>10.1f} {replay / size * 1e6:>9.2f} {(load + replay) * 1e3:>9.1f}"
            )


if __name__ == "__main__":
    asyncio.run(main())
