"""Tool calls through the full gated pipeline vs the bare tool body.

Gated: ``tools/pre-execute`` (the ``ask_tools`` gate) → ask routed to the approval service →
an in-process answerer allows once → ``approval/asked`` + ``approval/decided`` appended and
flushed durably to SQLite → policy resolved → body → post-execute.
Bypassed: the same tool body called directly.
``--stream``: a commit listener is subscribed and a consumer task takes every committed event
off its queue, as ``Harness.stream()`` (``tether run --json``) does.
``--ungated``: instead, the CPU time (``time.process_time``) of a call that asks nobody (a
``bash``-named tool body that does nothing, a compound command, no gate and no permission
rules), through the whole pipeline in an in-memory store: what every call pays for the
pipeline's own steps. It imports nothing newer than the pipeline, so the same script measures
older code (``PYTHONPATH=/path/to/old/src``) for an A/B.

Run: ``.venv/bin/python bench/gated_calls.py [--calls N] [--runs R] [--stream | --ungated]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from tether._signals import AbortSignal
from tether.kernel import SESSIONS_SERVICE
from tether.kernel._plugin import Kernel
from tether.plugins._ask_tools import plugin as ask_tools
from tether.policy._approval import approval_plugin, register_answerer
from tether.policy._sandbox_policy import sandbox_policy_plugin
from tether.session import Event, SessionMeta, SessionStore
from tether.session.persistence import open_persistence
from tether.tools._base import ToolArgs, ToolCall, ToolResult
from tether.tools._pipeline import ToolRuntime


class NoArgs(ToolArgs):
    value: int = 0


class Noop:
    name = "noop"
    description = "Does nothing."
    Args = NoArgs

    async def run(self, call: ToolCall) -> ToolResult:
        return ToolResult("ok")


class Owner:
    def __init__(self, session: object) -> None:
        self.session = session


async def consume(queue: asyncio.Queue[Event]) -> None:
    while True:
        await queue.get()


async def measure(calls: int, workdir: Path, stream: bool) -> tuple[list[float], list[float]]:
    kernel = Kernel()
    store = SessionStore(open_persistence(f"sqlite:///{workdir / 'bench.db'}"))
    committed: asyncio.Queue[Event] = asyncio.Queue()
    consumer = asyncio.create_task(consume(committed)) if stream else None
    if stream:
        # Imported here: without --stream this script also measures code that predates it.
        from tether.session.persistence._commits import commits_of

        commits_of(store.persistence).on_commit(
            lambda commit: [committed.put_nowait(event) for event in commit.events]
        )
    kernel.ctx.provide(SESSIONS_SERVICE, store)
    kernel.load(sandbox_policy_plugin, {"mode": "workspace-write", "workspace_root": str(workdir)})
    kernel.load(approval_plugin, {"policy": "ask"})
    kernel.load(ask_tools, {"tools": ["noop"]})
    register_answerer(kernel.ctx, lambda request, next_: "allowed-once")
    tools = ToolRuntime(kernel.ctx)
    tool = Noop()
    tools.register(tool)
    session = store.create(meta=SessionMeta(cwd=str(workdir)))
    session.append("turn/start", {"turn": 1})
    agent = Owner(session)
    signal = AbortSignal()
    gated: list[float] = []
    for i in range(calls):
        start = time.perf_counter()
        result = await tools.execute(agent, f"c{i}", "noop", '{"value": 1}', signal)  # type: ignore[arg-type]
        gated.append(time.perf_counter() - start)
        assert result.content == "ok", result
    bare: list[float] = []
    call = ToolCall("c", "noop", NoArgs(value=1), "{}", agent, signal, kernel.ctx, None)  # type: ignore[arg-type]
    for _ in range(calls):
        start = time.perf_counter()
        await tool.run(call)
        bare.append(time.perf_counter() - start)
    await store.close()
    if consumer is not None:
        consumer.cancel()
    return gated, bare


class CommandArgs(ToolArgs):
    command: str = ""


class FakeBash:
    name = "bash"
    description = "Does nothing with its command."
    Args = CommandArgs

    async def run(self, call: ToolCall) -> ToolResult:
        return ToolResult("ok")


async def ungated_cpu(calls: int, workdir: Path) -> float:
    """CPU seconds per call of a tool that asks nobody, through the whole pipeline."""
    kernel = Kernel()
    store = SessionStore()
    kernel.ctx.provide(SESSIONS_SERVICE, store)
    kernel.load(sandbox_policy_plugin, {"mode": "workspace-write", "workspace_root": str(workdir)})
    kernel.load(approval_plugin, {"policy": "ask"})
    tools = ToolRuntime(kernel.ctx)
    tools.register(FakeBash())
    session = store.create(meta=SessionMeta(cwd=str(workdir)))
    session.append("turn/start", {"turn": 1})
    agent, signal = Owner(session), AbortSignal()
    arguments = '{"command": "cd src && make -j4 | tee log"}'
    start = time.process_time()
    for i in range(calls):
        result = await tools.execute(agent, f"c{i}", "bash", arguments, signal)  # type: ignore[arg-type]
        assert result.content == "ok", result
    return (time.process_time() - start) / calls


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--ungated", action="store_true")
    args = parser.parse_args()
    if args.ungated:
        with tempfile.TemporaryDirectory() as tmp:
            cpu = [asyncio.run(ungated_cpu(args.calls, Path(tmp))) for _ in range(args.runs)]
        spread = f"{min(cpu) * 1e6:.1f}-{max(cpu) * 1e6:.1f}"
        print(f"a call that asks nobody, {args.calls} calls x {args.runs} runs")
        print(f"CPU per call: median {statistics.median(cpu) * 1e6:.1f} µs ({spread})")
        return
    medians, p99s, bare_medians, rates = [], [], [], []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            gated, bare = asyncio.run(measure(args.calls, Path(tmp), args.stream))
        medians.append(statistics.median(gated))
        p99s.append(pct(gated, 0.99))
        bare_medians.append(statistics.median(bare))
        rates.append(len(gated) / sum(gated))
    gated_p50 = statistics.median(medians)
    bare_p50 = statistics.median(bare_medians)
    streamed = ", commits streamed" if args.stream else ""
    print(f"gated tool calls, {args.calls} calls x {args.runs} runs (median of runs){streamed}")
    print(f"{'path':<28}{'calls/s':>12}{'p50 ms':>10}{'p99 ms':>10}")
    print(
        f"{'full pipeline (SQLite)':<28}{statistics.median(rates):>12.0f}"
        f"{gated_p50 * 1e3:>10.3f}{statistics.median(p99s) * 1e3:>10.3f}"
    )
    print(f"{'bypassed (tool body)':<28}{1 / bare_p50:>12.0f}{bare_p50 * 1e3:>10.4f}{'':>10}")
    print(
        f"ratio gated/bypassed p50: {gated_p50 / bare_p50:.0f}x; target p50 < 1 ms: "
        f"{'met' if gated_p50 < 1e-3 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
