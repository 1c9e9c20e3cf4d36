"""What one hand-off to a store's writer thread costs, apart from the work it hands over.

    .venv/bin/python bench/handoff.py [--n 2000] [--rounds 5]
    PYTHONPATH=/tmp/base/src .venv/bin/python bench/handoff.py    # another checkout's code

Every commit of the SQLite and JSONL stores runs on the backend's one worker thread
(``session/persistence/_worker.py``); the event loop waits for it, often asleep in ``epoll``
the whole time (an approval's flush, the commit that ends a run). This awaits ``Worker.run``
``--n`` times per round, with three bodies: nothing (both threads stay busy), a 300 µs sleep
(the loop falls asleep and is woken, as by a ``FULL`` commit on a fast disk; the sleep itself
costs no CPU), and 300 µs of CPU with the GIL held. Per hand-off it prints the loop thread's
CPU time and the process's (all threads), medians over the rounds and their spread, so two
checkouts run one after the other compare on CPU rather than on a noisy wall clock.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable

from tether.session.persistence._worker import Worker


def nothing() -> None:
    return None


def nap() -> None:
    time.sleep(0.0003)


def spin() -> None:
    start = time.thread_time()
    while time.thread_time() - start < 0.0003:
        pass


BODIES: dict[str, Callable[[], None]] = {"nothing": nothing, "sleep 300us": nap, "cpu 300us": spin}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="hand-offs per round and body")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    worker = Worker("bench-handoff", "bench worker")
    loop_us: dict[str, list[float]] = {name: [] for name in BODIES}
    process_us: dict[str, list[float]] = {name: [] for name in BODIES}
    for _ in range(args.rounds):
        for name, body in BODIES.items():
            for _ in range(50):
                await worker.run(body)
            thread, process = time.thread_time_ns(), time.process_time_ns()
            for _ in range(args.n):
                await worker.run(body)
            loop_us[name].append((time.thread_time_ns() - thread) / args.n / 1000)
            process_us[name].append((time.process_time_ns() - process) / args.n / 1000)
    await worker.close(nothing)
    print(f"{'body':<12} {'loop thread µs':>15} {'spread':>13} {'process µs':>11} {'spread':>13}")
    for name in BODIES:
        lo, pr = loop_us[name], process_us[name]
        print(
            f"{name:<12} {statistics.median(lo):>15.1f} {min(lo):>6.1f}–{max(lo):<6.1f} "
            f"{statistics.median(pr):>11.1f} {min(pr):>6.1f}–{max(pr):<6.1f}"
        )


if __name__ == "__main__":
    asyncio.run(main())
