"""Delegation fan-out: many continuable children, then a cold resume of each.

    .venv/bin/python bench/fanout.py [--store jsonl|sqlite] [--children 100] [--steps 10]
                                     [--big-events 1000] [--repeats 7]
                                     [--scale 1000] [--rounds 1]

Everything goes through the real composition (``Harness.open``: kernel, sandbox policy,
approval, presets, file tools, the ``subagents`` plugin) with the scripted model:

1. **Fan-out.** One root starts ``--children`` continuable children through the continuation
   manager (the ``subagent`` tool's path). Each child runs a ``--steps``-step task: a ``read``
   of a small file per step, then a final reply. Children run concurrently; each settlement
   notice reaches the root (new turns or folded steps). Reported: wall time, harness CPU per
   step (``time.process_time`` of the whole process, all threads, divided by every step of
   every session in the phase), and peak RSS (``ru_maxrss``).
2. **Cold resume.** Each settled child gets one ``followup`` from the root: durable inspect,
   lineage check, load, recompose, accept the message. Children are resumed one at a time on a
   quiet loop and the latency of ``followup`` (until inbox acceptance) is reported per child.
3. **Big child.** One child whose log holds about ``--big-events`` events is cold-resumed
   ``--repeats`` times; the median ``followup`` latency is reported against the 20 ms target.
4. **Scaling.** The fan-out alone, in a fresh harness and store each time, with ``--children``
   and with ``--scale`` children, alternately for ``--rounds`` rounds. Reported: the median
   wall and CPU per step of each size (also the event loop thread's own CPU per step,
   ``time.thread_time``, and the part of it the cyclic garbage collector took, timed with
   ``gc.callbacks``) and their ratios; linear fan-out means the wall grows
   with the children (at most 11x from 100 to 1,000) and the CPU per step not at all (target:
   under 0.6 ms per step with 1,000 children). ``--scale 0`` leaves it out.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tether._harness import Harness
from tether.agent import Agent
from tether.agent._agent import AgentOptions
from tether.model import ScriptedModel
from tether.session import Event, Persistence, Session
from tether.session.persistence import JsonlPersistence, SqlitePersistence
from tether.subagents import SUBAGENTS_SERVICE
from tether.subagents._continuation import ContinuationManager

EVENTS_PER_READ_STEP = 5  # step/start, assistant/message, tool/call, tool/result, step/end


def backend(kind: str, directory: Path) -> Persistence:
    if kind == "sqlite":
        return SqlitePersistence(directory / "store.db")
    return JsonlPersistence(directory / "sessions")


def child_steps(steps: int) -> list[dict[str, Any]]:
    reads = [{"tool_calls": [{"name": "read", "arguments": {"path": "data.txt"}}]}] * (steps - 1)
    return [*reads, {"text": "task done"}]


def script(children: int, steps: int, big_steps: int) -> dict[str, Any]:
    return {
        "agents": [
            {"match": {"depth": 0}, "steps": [{"text": "noted"}]},
            {"match": {"depth": 1, "label": "big"}, "steps": child_steps(big_steps)},
            {"match": {"depth": 1}, "steps": child_steps(steps)},
        ]
    }


class StepCounter:
    def __init__(self) -> None:
        self.steps = 0
        self.child_steps = 0

    def __call__(self, session: Session, event: Event) -> None:
        if event.type == "step/start":
            self.steps += 1
            if session.header.delegation_depth > 0:
                self.child_steps += 1


class CollectorClock:
    """The event loop thread's CPU spent in the cyclic garbage collector (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.thread_time()
        elif threading.current_thread() is threading.main_thread():
            self.seconds += time.thread_time() - self._started


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def manager_of(harness: Harness) -> ContinuationManager:
    manager = harness.ctx.get(SUBAGENTS_SERVICE)
    assert isinstance(manager, ContinuationManager)
    return manager


async def cold_resume(harness: Harness, root: Agent, child_id: str) -> float:
    manager = manager_of(harness)
    start = time.perf_counter()
    await manager.followup(root, child_id, "once more")
    elapsed = time.perf_counter() - start
    await harness.settle()
    return elapsed


def workspace(directory: Path) -> Path:
    (directory / "ws").mkdir()
    (directory / "ws" / "data.txt").write_text("a line of data\n" * 20)
    return directory / "ws"


async def fan_out(harness: Harness, root: Agent, children: int) -> tuple[dict[str, Any], list[str]]:
    """Start ``children`` continuable children of ``root`` and wait until all have settled."""
    manager = manager_of(harness)
    counter = StepCounter()
    remove = harness.store.on_event(counter)
    collector = CollectorClock()
    gc.callbacks.append(collector)
    wall0, cpu0, loop0 = time.perf_counter(), time.process_time(), time.thread_time()
    ids = [await manager.start(root, f"task {i}", label=f"c{i}") for i in range(children)]
    await harness.settle()
    out = {
        "wall": time.perf_counter() - wall0,
        "cpu": time.process_time() - cpu0,
        "loop_cpu": time.thread_time() - loop0,
        "collector": collector.seconds,
        "steps": counter.steps,
        "child_steps": counter.child_steps,
    }
    gc.callbacks.remove(collector)
    remove()
    return out, ids


async def fan_out_alone(args: argparse.Namespace, children: int) -> dict[str, Any]:
    """One fan-out of ``children`` in a fresh harness and store (the scaling phase)."""
    with tempfile.TemporaryDirectory(prefix="tether-fanout-") as tmp:
        directory = Path(tmp)
        model = ScriptedModel.from_dict(script(children, args.steps, 2))
        store = backend(args.store, directory)
        async with Harness.open(workspace=workspace(directory), model=model, store=store) as h:
            root = h.agent_for(h.new_root_session())
            h.root = root
            out, _ = await fan_out(h, root, children)
    return out


async def measure(args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    big_steps = max(2, args.big_events // EVENTS_PER_READ_STEP)
    model = ScriptedModel.from_dict(script(args.children, args.steps, big_steps))
    store = backend(args.store, directory)
    out: dict[str, Any] = {}
    async with Harness.open(workspace=workspace(directory), model=model, store=store) as harness:
        manager = manager_of(harness)
        root = harness.agent_for(harness.new_root_session())
        harness.root = root

        # 1. fan-out
        fanned, ids = await fan_out(harness, root, args.children)
        out["fanout_wall"], out["fanout_cpu"] = fanned["wall"], fanned["cpu"]
        out["steps"], out["child_steps"] = fanned["steps"], fanned["child_steps"]

        # 2. cold-resume each child once
        wall0 = time.perf_counter()
        out["resume"] = [await cold_resume(harness, root, child_id) for child_id in ids]
        out["resume_wall"] = time.perf_counter() - wall0

        # 3. a ~1,000-event child
        # A turn is capped at max_steps (default 50): give the big child room for its task.
        options = AgentOptions(model, max_steps=big_steps + 10)
        big = await manager.start(root, "long task", label="big", options=options)
        await harness.settle()
        persistence = harness.store.persistence
        assert persistence is not None
        out["big_events"] = len((await persistence.inspect(big)).events)
        out["big_inspect"], out["big_load"] = [], []
        for _ in range(args.repeats):
            start = time.perf_counter()
            await persistence.inspect(big)
            out["big_inspect"].append(time.perf_counter() - start)
            start = time.perf_counter()
            await persistence.load(big)
            out["big_load"].append(time.perf_counter() - start)
        out["big_resume"] = [await cold_resume(harness, root, big) for _ in range(args.repeats)]
    out["rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    # 4. scaling: each size in a fresh harness, alternately
    runs: dict[int, list[dict[str, Any]]] = {args.children: [], args.scale: []}
    for _ in range(args.rounds if args.scale else 0):
        for children in (args.children, args.scale):
            runs[children].append(await fan_out_alone(args, children))
    out["scaling"] = runs
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", choices=["jsonl", "sqlite"], default="jsonl")
    parser.add_argument("--children", type=int, default=100)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--big-events", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--scale", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tether-fanout-") as tmp:
        r = asyncio.run(measure(args, Path(tmp)))
    cpu_per_step = r["fanout_cpu"] / r["steps"]
    resume, big = r["resume"], r["big_resume"]
    big_p50 = statistics.median(big)
    print(f"fan-out: {args.children} continuable children x {args.steps} steps ({args.store})")
    print(f"  wall                 {r['fanout_wall'] * 1e3:10.1f} ms")
    print(f"  steps                {r['steps']:10d}  ({r['child_steps']} in children)")
    print(f"  harness CPU          {r['fanout_cpu'] * 1e3:10.1f} ms")
    print(
        f"  harness CPU / step   {cpu_per_step * 1e3:10.3f} ms  (target < 1 ms: "
        f"{'met' if cpu_per_step < 1e-3 else 'NOT met'})"
    )
    print(f"  peak RSS             {r['rss_mib']:10.1f} MiB")
    print(f"cold resume of each child once ({len(resume)} children, one at a time)")
    print(f"  wall (incl. runs)    {r['resume_wall'] * 1e3:10.1f} ms")
    print(
        f"  followup p50 / p95 / max  {statistics.median(resume) * 1e3:.2f} / "
        f"{pct(resume, 0.95) * 1e3:.2f} / {max(resume) * 1e3:.2f} ms"
    )
    print(f"cold resume of a {r['big_events']}-event child ({len(big)} repeats)")
    print(
        f"  followup p50 / min / max  {big_p50 * 1e3:.2f} / {min(big) * 1e3:.2f} / "
        f"{max(big) * 1e3:.2f} ms  (target < 20 ms: {'met' if big_p50 < 0.02 else 'NOT met'})"
    )
    print(
        f"  of which: inspect p50 {statistics.median(r['big_inspect']) * 1e3:.2f} ms, "
        f"load p50 {statistics.median(r['big_load']) * 1e3:.2f} ms (each reads the whole log)"
    )
    print(f"  samples: {', '.join(f'{x * 1e3:.1f}' for x in big)} ms")

    if args.scale:
        print_scaling(args, r["scaling"])


def spread(samples: list[float], scale: float, digits: int) -> str:
    median = statistics.median(samples) * scale
    if len(samples) == 1:
        return f"{median:.{digits}f}"
    return (
        f"{median:.{digits}f} ({min(samples) * scale:.{digits}f}-{max(samples) * scale:.{digits}f})"
    )


def print_scaling(args: argparse.Namespace, runs: dict[int, list[dict[str, Any]]]) -> None:
    small, large = args.children, args.scale
    print(
        f"scaling: {small} vs {large} children x {args.steps} steps, each in a fresh harness, "
        f"{args.rounds} round(s) alternately; median (min-max)"
    )
    print(
        f"  {'children':>8}  {'wall ms':>24}  {'CPU / step ms':>22}  {'loop':>6}  {'gc':>6}  "
        f"{'steps':>6}  root steps"
    )
    for children in (small, large):
        rows = runs[children]
        wall = spread([r["wall"] for r in rows], 1e3, 1)
        per_step = spread([r["cpu"] / r["steps"] for r in rows], 1e3, 3)
        steps = statistics.median(r["steps"] for r in rows)
        root = statistics.median(r["steps"] - r["child_steps"] for r in rows)
        loop = statistics.median(r["loop_cpu"] / r["steps"] for r in rows) * 1e3
        collector = statistics.median(r["collector"] / r["steps"] for r in rows) * 1e3
        print(
            f"  {children:>8}  {wall:>24}  {per_step:>22}  {loop:>6.3f}  {collector:>6.3f}  "
            f"{steps:>6.0f}  {root:.0f}"
        )
    wall_ratio = statistics.median(r["wall"] for r in runs[large]) / statistics.median(
        r["wall"] for r in runs[small]
    )
    cpu_large = statistics.median(r["cpu"] / r["steps"] for r in runs[large])
    cpu_ratio = cpu_large / statistics.median(r["cpu"] / r["steps"] for r in runs[small])
    linear = large / small * 1.1
    print(
        f"  ratio {large}/{small}: wall {wall_ratio:.1f}x (target <= {linear:.1f}x: "
        f"{'met' if wall_ratio <= linear else 'NOT met'}), CPU / step {cpu_ratio:.2f}x"
    )
    print(
        f"  CPU / step with {large} children {cpu_large * 1e3:.3f} ms (target < 0.6 ms: "
        f"{'met' if cpu_large < 0.6e-3 else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
