"""Spawn-to-exit of a trivial command: unconfined vs bubblewrap vs Landlock.

Each sample is ``confine`` + :func:`tether.sandbox.spawn` + wait for the exit of ``true``, the
whole cost a ``bash`` call pays for its sandbox. Backends are interleaved round by round so
machine noise hits them alike. bubblewrap and Landlock are measured through their fast path
(a fork-server pair, the default), Landlock also through its launcher argv (what a caller that
can only spawn an argv gets).

After a fork-server sample the script waits until the server has forked the next pair of that
kind and prepared it for the next command (``ForkServer.ready``: a bubblewrap pair has run
bwrap, a Landlock pair has entered its domain; tether/sandbox/_prepared.py), and
:data:`SETTLE` more, so that work (done between commands, off a spawn's critical path, as
between two ``bash`` calls of an agent) is not charged to whichever sample runs next. The
script counts the samples a prepared pair served, and those it could not (something it was
prepared from had changed): a figure is a ``bash`` call's only when prepared pairs served it.

The median is the figure the targets are read from. On a machine shared with other work the
lower tail (``p10``: the fastest tenth of the samples, and the added time measured there) is
the better estimate of what a spawn costs when it gets the CPU it asks for.

``--ballast MB`` grows this process's heap first (touched pages): a real harness is bigger
than this script, and any design that forks the harness per command gets slower with it.

The workspace is a realistic one: a dozen top-level entries and a ``.git``, so the cost of
granting the workspace root entry by entry (docs/sandbox.md, "The workspace root") is in
every sample. It is left alone for :data:`~tether.sandbox._listings.FRESH_NS` before the
first sample, as a real workspace is: what the sandbox derived from a directory changed that
recently is derived again at every command. ``--dir`` says where it is made (default
``/var/tmp``; a directory other processes keep changing costs every sample a derivation).

Run: ``.venv/bin/python bench/sandbox.py [--runs N] [--mode read-only|workspace-write]
[--ballast MB] [--dir DIR]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tether.policy import SandboxExecutionPolicy, SandboxMode
from tether.sandbox import SandboxProvider, spawn, unconfined
from tether.sandbox import _listings as listings
from tether.sandbox._command import ConfinedCommand
from tether.sandbox._landlock_client import fork_server, kind_of

SETTLE = 0.05
"""Seconds a fresh pair gets to set itself up before the next sample."""


async def sample(make: Callable[[], ConfinedCommand], cwd: str) -> float:
    started = time.perf_counter()
    command = make()
    process = await spawn(command, cwd=cwd, stdout=None, stderr=None)
    await process.wait()
    command.close()
    elapsed = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"{command.backend}: exit status {process.returncode}")
    if command.fast_path:
        if not await fork_server().ready(kind_of(command)):
            raise SystemExit("the fork server stopped")
        await asyncio.sleep(SETTLE)
    return elapsed


TOP_LEVEL_FILES = ("README.md", "pyproject.toml", "LICENSE", ".gitignore", "Makefile")
TOP_LEVEL_DIRS = ("src", "tests", "docs", "examples", "scripts", "bench")


def populate(ws: Path) -> None:
    """A project-like workspace: top-level files and directories, and a ``.git``."""
    for name in TOP_LEVEL_FILES:
        (ws / name).write_text(f"{name}\n")
    for name in TOP_LEVEL_DIRS:
        (ws / name / "pkg").mkdir(parents=True)
        (ws / name / "pkg" / "module.py").write_text("x = 1\n")
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (ws / ".git" / "config").write_text("[core]\n")


async def main(runs: int, mode: str, where: str) -> None:
    with tempfile.TemporaryDirectory(prefix="tether-bench-", dir=where) as ws:
        populate(Path(ws))
        assert len(os.listdir(ws)) == len(TOP_LEVEL_FILES) + len(TOP_LEVEL_DIRS) + 1
        await asyncio.sleep(listings.FRESH_NS / 1e9 + 0.5)
        policy = SandboxExecutionPolicy(SandboxMode(mode), ws)
        argv = ["true"]
        variants: dict[str, Callable[[], ConfinedCommand]] = {
            "unconfined": lambda: unconfined(argv)
        }
        for label, options in (
            ("bubblewrap", {"backends": ("bwrap",)}),
            ("landlock (fork server)", {"backends": ("landlock",)}),
            ("landlock (launcher)", {"backends": ("landlock",), "landlock_fast_path": False}),
        ):
            provider = SandboxProvider(disable=(), **options)  # type: ignore[arg-type]
            if provider.backend_name() is None:
                print(f"{label}: unavailable ({provider.reasons()})")
                continue

            def make(p: SandboxProvider = provider) -> ConfinedCommand:
                return p.confine(argv, policy)

            variants[label] = make
        for make in variants.values():  # warm up (first spawn, imports, page cache)
            for _ in range(5):
                await sample(make, ws)
        times: dict[str, list[float]] = {label: [] for label in variants}
        served: dict[str, list[int]] = {label: [0, 0] for label in variants}
        server = fork_server()
        for _ in range(runs):
            for label, make in variants.items():
                before = (server.prepared_taken, server.prepared_stale)
                times[label].append(await sample(make, ws))
                served[label][0] += server.prepared_taken - before[0]
                served[label][1] += server.prepared_stale - before[1]

    base = statistics.median(times["unconfined"])
    base_p10 = statistics.quantiles(times["unconfined"], n=10)[0]
    print(f"spawn-to-exit of `true`, mode {mode}, median of {runs} interleaved runs")
    print(
        f"{'variant':<22}{'median ms':>10}{'p90 ms':>9}{'added ms':>10}{'ratio':>8}"
        f"{'p10 ms':>9}{'added p10':>11}"
    )
    for label, samples in times.items():
        median = statistics.median(samples)
        p10, *_, p90 = statistics.quantiles(samples, n=10)
        print(
            f"{label:<22}{median * 1000:>10.2f}{p90 * 1000:>9.2f}"
            f"{(median - base) * 1000:>10.2f}{median / base:>8.1f}x"
            f"{p10 * 1000:>9.2f}{(p10 - base_p10) * 1000:>11.2f}"
        )
    for label, (taken, stale) in served.items():
        if taken or stale:
            print(f"{label}: {taken} of {runs} samples served by a prepared pair, {stale} not")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument(
        "--mode", choices=["read-only", "workspace-write"], default="workspace-write"
    )
    parser.add_argument("--ballast", type=int, default=0, help="MB of heap to hold first")
    parser.add_argument("--dir", default="/var/tmp", help="where to make the workspace")
    args = parser.parse_args()
    ballast = [bytearray(1 << 20) for _ in range(args.ballast)]
    asyncio.run(main(args.runs, args.mode, args.dir))
