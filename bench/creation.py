"""Per-call cost of the calls a confined command's supervisor checks and performs.

A confined command's ``open`` with ``O_CREAT`` (or for writing), ``mkdir``, ``rename`` and the
rest of the calls that make a name go to its supervisor, which refuses control names at any
depth and makes the call itself (docs/sandbox.md, "Control names at any depth"); a read-only
``open`` stays in the kernel. Each sample runs one confined Python loop that makes ``--calls``
such calls in a fresh directory of the workspace and reports the loop's own time (the spawn
is not in it), so ``(confined - unconfined) / calls`` is what one call adds. On a machine
shared with other work that wall time is mostly waiting for a CPU (each call is a round trip
between two processes), so the CPU time per call is printed too: the loop's own
(``process_time``) plus its supervisor's (``/proc/PID/stat``, read before and after the loop
while the command waits), and what that adds to the loop's own CPU time unconfined: what the
checks and the round trip cost, whatever the load (the call itself is made once either way,
by the command or by its supervisor).

Operations: ``create`` (``open(O_CREAT|O_WRONLY)`` of a new file, then ``close``), ``write``
(``open(O_WRONLY)`` of an existing one), ``mkdir``, ``rename`` and ``read`` (``open(O_RDONLY)``,
which must cost nothing more). Backends are interleaved round by round.

``--spawns N`` measures the spawn of ``true`` instead (bubblewrap's own set-up makes some
twenty such calls, which its supervisor lets through): wall time per spawn, and the CPU time
of everything below the fork server per spawn (its children's ``cutime + cstime``: the
pairs' supervisors, bwrap, the command), which the load of a shared machine moves less.

Run: ``.venv/bin/python bench/creation.py [--calls N] [--rounds R] [--ops create,read]`` or
``.venv/bin/python bench/creation.py --spawns N``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tether.policy import SandboxExecutionPolicy, SandboxMode
from tether.sandbox import SandboxProvider, spawn, unconfined
from tether.sandbox._command import ConfinedCommand
from tether.sandbox._landlock_client import fork_server, kind_of

PYTHON = os.path.realpath(sys.executable)

LOOPS = {
    "create": "for i in r: os.close(os.open(f'{d}/{i}', W | os.O_CREAT, 0o644))",
    "write": "for i in r: os.close(os.open(f'{d}/0', W))",
    "mkdir": "for i in r: os.mkdir(f'{d}/{i}')",
    "rename": "for i in r: os.rename(f'{d}/{(i - 1) % 2}', f'{d}/{i % 2}')",
    "read": "for i in r: os.close(os.open(f'{d}/0', os.O_RDONLY))",
}
"""Each loop runs in a fresh directory ``d`` holding file ``0``."""

SCRIPT = """
import os, sys, time
d, n = sys.argv[1], int(sys.argv[2])
W = os.O_WRONLY
r = range(1, n + 1)
os.mkdir(d)
os.close(os.open(f'{d}/0', W | os.O_CREAT, 0o644))
print('ready', flush=True)
time.sleep(0.2)
start, cpu = time.perf_counter(), time.process_time()
LOOP
print(time.perf_counter() - start, time.process_time() - cpu, flush=True)
time.sleep(0.2)
"""
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User and system time of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


async def sample(command: ConfinedCommand, cwd: str) -> tuple[float, float]:
    """The loop's wall time, and the CPU time it and its supervisor used meanwhile."""
    process = await spawn(command, cwd=cwd)
    assert process.stdout is not None
    supervised = command.backend != "none"
    await process.stdout.readline()
    before = cpu_seconds(process.pid) if supervised else 0.0
    took, loop_cpu = (float(x) for x in (await process.stdout.readline()).decode().split())
    after = cpu_seconds(process.pid) if supervised else 0.0
    _, err = await process.communicate()
    command.close()
    if process.returncode != 0:
        raise SystemExit(f"{command.backend}: exit {process.returncode}: {err.decode()}")
    return took, loop_cpu + after - before


async def main(calls: int, rounds: int, ops: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="tether-bench-", dir="/var/tmp") as ws:
        (Path(ws) / "work").mkdir()
        policy = SandboxExecutionPolicy(SandboxMode.WORKSPACE_WRITE, ws)
        variants: dict[str, Callable[[list[str]], ConfinedCommand]] = {"unconfined": unconfined}
        for label, backend in (("bubblewrap", "bwrap"), ("landlock", "landlock")):
            provider = SandboxProvider(backends=(backend,), disable=())
            if provider.backend_name() is None:
                print(f"{label}: unavailable ({provider.reasons()})")
                continue

            def make(argv: list[str], p: SandboxProvider = provider) -> ConfinedCommand:
                return p.confine(argv, policy)

            variants[label] = make
        counter = 0
        times: dict[tuple[str, str], list[float]] = {}
        cpu: dict[tuple[str, str], list[float]] = {}
        for round_ in range(rounds + 1):  # the first round warms up and is dropped
            for op in ops:
                script = SCRIPT.replace("LOOP", LOOPS[op])
                for label, make in variants.items():
                    counter += 1
                    where = os.path.join(ws, "work", str(counter))
                    took, used = await sample(make([PYTHON, "-c", script, where, str(calls)]), ws)
                    if round_:
                        times.setdefault((op, label), []).append(took)
                        cpu.setdefault((op, label), []).append(used)
    print(f"{calls} calls per loop, median of {rounds} interleaved rounds (microseconds per call)")
    print(
        f"{'operation':<10}{'variant':<14}{'wall':>8}{'added':>8}{'spread':>16}"
        f"{'CPU':>8}{'added':>8}"
    )
    for op in ops:
        base = statistics.median(times[(op, "unconfined")])
        base_cpu = statistics.median(cpu[(op, "unconfined")])
        for label in variants:
            samples = times[(op, label)]
            median = statistics.median(samples)
            low, high = min(samples), max(samples)
            used = statistics.median(cpu[(op, label)])
            print(
                f"{op:<10}{label:<14}{median / calls * 1e6:>8.1f}"
                f"{(median - base) / calls * 1e6:>8.1f}"
                f"{low / calls * 1e6:>8.1f}-{high / calls * 1e6:<7.1f}"
                f"{used / calls * 1e6:>8.1f}{(used - base_cpu) / calls * 1e6:>8.1f}"
            )


def children_cpu(pid: int) -> float:
    """User and system time of process ``pid``'s reaped children so far."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / TICK


async def spawns(count: int) -> None:
    with tempfile.TemporaryDirectory(prefix="tether-bench-", dir="/var/tmp") as ws:
        for name in ("src", "tests", "docs"):
            (Path(ws) / name).mkdir()
        (Path(ws) / ".git").mkdir()
        policy = SandboxExecutionPolicy(SandboxMode.WORKSPACE_WRITE, ws)
        providers = {
            label: SandboxProvider(backends=(backend,), disable=())
            for label, backend in (("bubblewrap", "bwrap"), ("landlock", "landlock"))
        }
        walls: dict[str, list[float]] = {label: [] for label in providers}
        cpu: dict[str, float] = dict.fromkeys(providers, 0.0)
        for round_ in range(count + 5):  # five rounds warm up
            for label, provider in providers.items():
                command = provider.confine(["true"], policy)
                server = fork_server()
                before = children_cpu(server.pid) if server.pid else 0.0
                started = time.perf_counter()
                process = await spawn(command, cwd=ws)
                await process.wait()
                took = time.perf_counter() - started
                command.close()
                await server.ready(kind_of(command))  # the next pair forked...
                await asyncio.sleep(0.05)  # ...and set up, off the spawn
                if round_ >= 5 and server.pid:
                    walls[label].append(took)
                    cpu[label] += children_cpu(server.pid) - before
    print(f"spawn of `true`, workspace-write, {count} interleaved rounds")
    print(f"{'variant':<14}{'median ms':>10}{'p10 ms':>8}{'CPU ms':>8}")
    for label, samples in walls.items():
        p10 = statistics.quantiles(samples, n=10)[0]
        print(
            f"{label:<14}{statistics.median(samples) * 1e3:>10.2f}{p10 * 1e3:>8.2f}"
            f"{cpu[label] / count * 1e3:>8.2f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ops", default="create,write,mkdir,rename,read")
    parser.add_argument("--spawns", type=int, default=0, help="measure N spawns of true")
    args = parser.parse_args()
    if args.spawns:
        asyncio.run(spawns(args.spawns))
    else:
        asyncio.run(main(args.calls, args.rounds, args.ops.split(",")))
