"""Load and replay time for 1k, 10k and 100k-event sessions (1M on request), both backends.

    .venv/bin/python bench/load.py [--runs 5] [--sizes 1000,10000,100000] [--backends sqlite]
    .venv/bin/python bench/load.py --runs 3 --sizes 10000,100000,1000000

``load`` is ``Persistence.load`` on a fresh handle (nothing cached): read every record, validate
each through ``Event.from_dict`` (or its fast path, which decides alike), plan repair.
``replay`` builds the live ``Session`` from the loaded events (what ``SessionStore.open`` does
next). Median over runs. The per-event columns show whether cost grows linearly: they should
stay flat as sessions grow, and ``× first`` is the per-event load cost against the first size.
``cpu µs/event`` is the process's CPU time (every thread) per event, steadier than the wall
clock on a shared machine.
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


async def measure(
    make: Callable[[Path], Persistence], size: int, runs: int
) -> tuple[float, float, float]:
    """Median seconds to load, CPU seconds to load, and seconds to replay a ``size``-event
    session."""
    events = realistic_events(size)
    header = SessionHeader("bench", T0)
    with tempfile.TemporaryDirectory(prefix="tether-bench-") as tmp:
        writer = make(Path(tmp))
        await writer.create(header)
        for index in range(0, size, 1000):
            await writer.append("bench", events[index : index + 1000])
        await writer.close()
        del events
        loads: list[float] = []
        cpus: list[float] = []
        replays: list[float] = []
        for _ in range(runs):
            backend = make(Path(tmp))
            try:
                await backend.list()  # open the connection untimed
                cpu = time.process_time()
                started = time.perf_counter()
                stored = await backend.load("bench")
                loaded = time.perf_counter()
                cpus.append(time.process_time() - cpu)
                Session(stored.header, stored.events)
                replayed = time.perf_counter()
            finally:
                await backend.close()
            assert len(stored.events) == size and not stored.repair.changed
            del stored
            loads.append(loaded - started)
            replays.append(replayed - loaded)
    return statistics.median(loads), statistics.median(cpus), statistics.median(replays)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    print(
        f"{'backend':<8} {'events':>9} {'load ms':>9} {'µs/event':>9} {'× first':>8} "
        f"{'cpu µs/event':>13} {'replay ms':>10} {'µs/event':>9} {'total ms':>9}"
    )
    for name in args.backends.split(","):
        first: float | None = None
        for size in sizes:
            load, cpu, replay = await measure(BACKENDS[name], size, args.runs)
            per_event = load / size
            first = per_event if first is None else first
            print(
                f"{name:<8} {size:>9,} {load * 1e3:>9.1f} {per_event * 1e6:>9.2f} "
                f"{per_event / first:>8.2f} {cpu / size * 1e6:>13.2f} {replay * 1e3:>10.1f} "
                f"{replay / size * 1e6:>9.2f} {(load + replay) * 1e3:>9.1f}",
                flush=True,
            )


if __name__ == "__main__":
    asyncio.run(main())
