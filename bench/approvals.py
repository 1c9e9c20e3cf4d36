"""Answering an approval from another process: how fast the waiting agent resumes, and whether
that depends on how many sessions the store holds.

For each store size (10, 1,000 and 10,000 stored sessions by default, built once per run), a
root agent (scripted) runs in ``tether run --approval-from store --json`` and calls ``write``
under the ``ask_tools`` gate, so it waits on its approval socket. For each sample, once its
wait marker is up, this process answers it:

- **end to end**: the real ``tether approvals answer ID allow`` command, timed from its spawn
  to ``approval/decided`` on the run's stream (the command's start-up, its lookup, the
  hand-over, the durable decision);
- **command alone**: the same command's spawn to its exit; **command CPU**: the CPU time
  (user and system) it used, which a loaded machine inflates far less than wall time;
- **pickup**: ``AnswerBox.deliver`` called here, timed from the call to ``approval/decided``
  (the socket hand-over, the peer checks and the durable decision: "answer delivered → agent
  resumes");
- **hand-over**: the ``deliver`` call alone (until the waiter said it took the answer).

A bare ``python -c pass`` is timed alongside, the floor of any command's start-up.

The waiting run is a child of this process and the answer comes from this process or its
other child: an answer from a process the run itself started would be refused.

``--compare SRC`` runs every sample a second time with another version of tether's source
(``PYTHONPATH=SRC`` for the spawned commands: a checkout of an earlier commit), interleaved,
so both see the same load; ``deliver`` is this version's in both (the socket protocol is the
same), so the pickup compares the waiting side.

Run: ``.venv/bin/python bench/approvals.py [--samples N] [--sizes 10,1000,10000]
[--compare OTHER/src]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from tether.session import SessionMeta, SessionStore
from tether.session._answer_box import AnswerBox
from tether.session._answer_channel import CLI_SURFACE
from tether.session.persistence import open_persistence

TETHER = str(Path(sys.executable).parent / "tether")
SCRIPT = {
    "agents": [
        {
            "steps": [
                {"tool_calls": [{"name": "write", "arguments": {"path": "a.txt", "content": "a"}}]},
                {"text": "ok"},
            ]
        }
    ]
}
MEASURES = ("end to end", "command alone", "command CPU", "pickup", "hand-over")


async def fill(store: str, count: int, workspace: Path) -> None:
    """``count`` finished sessions, each a turn with an answered approval in it (which a
    scan of the store would have to read past)."""
    sessions = SessionStore(open_persistence(store))
    try:
        for index in range(count):
            session = sessions.create(meta=SessionMeta(cwd=str(workspace)))
            session.append("turn/start", {"turn": 1})
            session.append("approval/asked", {"id": f"done-{index}", "tool_name": "write"})
            session.append("approval/decided", {"id": f"done-{index}", "outcome": "rejected"})
            session.append("turn/end", {"turn": 1, "reason": "completed"})
            if index % 500 == 499:
                await sessions.close()  # stores what is held, and lets it go
                sessions = SessionStore(open_persistence(store))
    finally:
        await sessions.close()


async def sample(
    base: Path, store: str, index: int, mode: str, env: dict[str, str] | None
) -> dict[str, float]:
    workspace = base / f"ws{index}-{mode}-{len(env or {})}"
    workspace.mkdir()
    script = base / f"s{index}-{mode}-{len(env or {})}.json"
    script.write_text(json.dumps(SCRIPT))
    run = await asyncio.create_subprocess_exec(
        TETHER,
        "run",
        "--model",
        f"scripted:{script}",
        "--workspace",
        str(workspace),
        "--store",
        store,
        "--plugin",
        "ask_tools",
        "--approval-from",
        "store",
        "--json",
        "write",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
    )
    assert run.stdout is not None
    box = AnswerBox.for_store(store)
    times: dict[str, float] = {}
    start = 0.0
    async for raw in run.stdout:
        event = json.loads(raw)
        if event["type"] == "approval/asked":
            approval_id = str(event["data"]["id"])
            while not box.is_waited(approval_id):
                await asyncio.sleep(0.001)  # the run announces its socket just after asking
            start = time.perf_counter()
            used = _children_cpu()
            if mode == "cli":
                answer = await asyncio.create_subprocess_exec(
                    TETHER,
                    "approvals",
                    "answer",
                    approval_id,
                    "allow",
                    "--store",
                    store,
                    stdout=asyncio.subprocess.DEVNULL,
                    env=env,
                )
                await answer.wait()
                times["command alone"] = time.perf_counter() - start
                times["command CPU"] = _children_cpu() - used
            else:
                box.deliver(approval_id, "allowed-once", CLI_SURFACE)
                times["hand-over"] = time.perf_counter() - start
        elif event["type"] == "approval/decided":
            times["end to end" if mode == "cli" else "pickup"] = time.perf_counter() - start
            break
    await run.communicate()
    if len(times) not in (2, 3):
        raise SystemExit(f"sample {index}: the run ended without deciding its approval")
    return times


Results = dict[int, dict[str, list[float]]]


def _children_cpu() -> float:
    """CPU seconds of the children reaped so far (the answering command, once it exited)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def bare_start() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - started


def median_spread(values: Sequence[float]) -> str:
    ordered = sorted(values)
    low, high = ordered[len(ordered) // 10], ordered[-1 - len(ordered) // 10]
    return f"{statistics.median(values) * 1000:8.1f} ({low * 1000:.1f}–{high * 1000:.1f})"


async def measure(
    sizes: Sequence[int], samples: int, compare: str | None
) -> tuple[Results, Results]:
    """This version's figures and, with ``compare``, the other version's, per store size."""
    envs: dict[str, dict[str, str] | None] = {"this": None}
    if compare is not None:
        envs["other"] = {**os.environ, "PYTHONPATH": compare}
    results: dict[str, Results] = {name: {} for name in envs}
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            base = Path(tmp) / f"n{size}"
            base.mkdir()
            store = f"sqlite:///{base / 'bench.db'}"
            started = time.perf_counter()
            await fill(store, size, base)
            print(f"stored {size} sessions in {time.perf_counter() - started:.1f} s", flush=True)
            for name in envs:
                results[name][size] = {m: [] for m in (*MEASURES, "python -c pass")}
            for index in range(samples):
                # Interleaved (modes, versions), so drifts in the machine's load hit all alike.
                for name, env in envs.items():
                    found = results[name][size]
                    for mode in ("cli", "deliver"):
                        for key, value in (await sample(base, store, index, mode, env)).items():
                            found[key].append(value)
                    found["python -c pass"].append(bare_start())
    return results["this"], results.get("other", {})


def report(title: str, results: Results, sizes: Sequence[int], samples: int) -> None:
    print(f"\n{title}: median ms (10th–90th percentile), {samples} samples per store size")
    print(f"{'stored sessions':<20}" + "".join(f"{size:>26,}" for size in sizes))
    for row in (*MEASURES, "python -c pass"):
        print(f"{row:<20}" + "".join(f"{median_spread(results[s][row]):>26}" for s in sizes))
    first, last = sizes[0], sizes[-1]
    for row in ("end to end", "command CPU", "pickup"):
        ratio = statistics.median(results[last][row]) / statistics.median(results[first][row])
        print(f"{row}: {last:,} sessions / {first:,} sessions = {ratio:.2f}×")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--sizes", default="10,1000,10000")
    parser.add_argument("--compare", metavar="SRC", help="another version's src directory")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    this, other = asyncio.run(measure(sizes, args.samples, args.compare))
    report("approval answered from another process", this, sizes, args.samples)
    if other:
        report(f"the same with {args.compare}", other, sizes, args.samples)
    first, last = sizes[0], sizes[-1]
    pickup = statistics.median(this[last]["pickup"]) * 1000
    print(
        f"\ntarget: answer delivered → agent resumes under 5 ms, flat from {first:,} to "
        f"{last:,} sessions: {pickup:.1f} ms at {last:,}"
    )


if __name__ == "__main__":
    main()
