"""One approval round trip in tether, measured the way the peer frameworks' rows are.

The cycle is the one the OpenAI Agents SDK and LangGraph rows of the peer comparison time
(docs/benchmarks.md, "Against the peer frameworks"): a fresh conversation, a model that asks
for a tool needing approval, an in-process approver that allows it once, the audit pair
committed, the tool run, the model's final answer. The model is a fake one, in-process and
deterministic, so no network and no tokens are involved.

Composition, built once outside the timed region: ``Harness.open(workspace=<tmp dir>,
model=ScriptedToolModel(), store=<variant>, sandbox="workspace-write", approval="ask",
approver=<async fn that allows once>, plugins=[ask_tools {tools: [delete_file]}])`` plus one
registered tool ``delete_file(path)``. Everything ``Harness.open`` loads by default (sandbox,
bash, subagents, file tools, ask_user) stays loaded: that is tether's real composition.

One timed cycle, what ``Harness.run`` does for a new root and what ends a conversation::

    session = harness.new_root_session()
    agent = Agent(...); remove = harness.agents.register(agent)   # Harness.agent_for
    agent.followup("please delete /tmp/x")
    await harness.settle(); await harness.store.commit(session)   # Harness.run's tail
    (checks: completed with "done", the tool ran once, two model calls)
    await harness.store.dispose(session); remove()

Variants (``--store``):
  sqlite          store URL ``sqlite:///...``: ``synchronous=FULL``, session leases (the default)
  sqlite-full-obj ``SqlitePersistence(path)`` passed as an object: FULL, no leases
  sqlite-normal   ``SqlitePersistence(path, synchronous="NORMAL")`` as an object
  jsonl           store URL ``jsonl:///...`` (write + fsync per commit, session leases)
  memory          store URL ``memory://``: in-process only, nothing durable

``--model scripted`` uses tether's ``ScriptedModel`` (from a dict script) instead of the
minimal client.

After the timed run the script reads the store through a fresh handle (the same in-process
store for ``memory``) and checks that every session holds, in order, ``tool/call``,
``approval/asked``, ``approval/decided {allowed-once}``, ``tool/result "deleted /tmp/x"``;
then it runs 3 more cycles in which the tool body itself reads the store and requires the
``approval/decided`` to be there already.

``--count-syncs`` counts, over the measured cycles, the syncs tether asks for: every
``os.fsync``/``os.fdatasync`` and every SQLite commit at ``synchronous=FULL`` (which fsyncs
inside SQLite, out of Python's sight), reported as ``syncs_per_cycle``; for a machine
without ``strace``, which counts the system calls themselves (``bench/cycle.py``).

Output: one ``RESULT {json}`` line on stdout (``name``, ``n``, ``median_us``, ``p90_us``,
``p99_us``, ``min_us``, ``max_us``, ``peak_rss_mib``, ``cpu_median_us``: process CPU time
per cycle, all threads), a summary on stderr. ``--n``, ``--warmup`` and ``--budget-s`` bound
the run. The line format is the one the peers' scripts print, so the rows go in one table.

Run: ``.venv/bin/python bench/peer_cycle.py --store sqlite [--n 300]``
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import platform
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

if os.environ.get("TETHER_SRC"):
    # Run beside the peers with TETHER_SRC naming a checkout: measure that checkout's code,
    # whichever tether the comparison's shared environment had installed first.
    sys.path.insert(0, str(Path(os.environ["TETHER_SRC"]).resolve() / "src"))

from tether import Harness
from tether.agent import Agent
from tether.agent._agent import AgentOptions
from tether.kernel import PluginEntry
from tether.model import Completion, ModelRequest, ScriptedModel
from tether.model import ToolCall as ModelToolCall
from tether.session.persistence import JsonlPersistence, SqlitePersistence
from tether.tools import ToolArgs, ToolCall, ToolResult

PROMPT = "please delete /tmp/x"
SETTLE_S = 2.1
STORES = ("sqlite", "sqlite-full-obj", "sqlite-normal", "jsonl", "memory")


class Counters:
    tool_runs = 0
    model_calls = 0
    verify_in_tool = False
    checked_in_tool = 0


class DeleteArgs(ToolArgs):
    path: str


class DeleteFile:
    name = "delete_file"
    description = "Delete a file (pretend)."
    Args = DeleteArgs

    def __init__(self, reader: Callable[[], Any]) -> None:
        self._reader = reader

    async def run(self, call: ToolCall) -> ToolResult:
        Counters.tool_runs += 1
        if Counters.verify_in_tool:
            assert call.agent is not None
            await assert_decided_stored(self._reader, call.agent.session.id)
            Counters.checked_in_tool += 1
        return ToolResult(f"deleted {call.args.path}")  # type: ignore[attr-defined]


class ScriptedToolModel:
    """A minimal model client: a tool call first, the final text once a tool result is there."""

    async def stream(
        self, request: ModelRequest, signal: object = None
    ) -> AsyncIterator[Completion]:
        Counters.model_calls += 1
        if not any(m.role == "tool" for m in request.messages):
            yield Completion(
                text="",
                tool_calls=(ModelToolCall("call_1", "delete_file", '{"path":"/tmp/x"}'),),
                finish_reason="tool_calls",
            )
        else:
            yield Completion(text="done", finish_reason="stop")


def scripted_model() -> ScriptedModel:
    steps = [
        {"tool_calls": [{"name": "delete_file", "arguments": {"path": "/tmp/x"}}]},
        {"text": "done"},
    ]
    return ScriptedModel.from_dict({"agents": [{"steps": steps}]})


async def approver(request: Any) -> str:
    assert request.tool_name == "delete_file", request.tool_name
    return "allowed-once"


async def assert_decided_stored(reader: Callable[[], Any], session_id: str) -> None:
    handle, close = reader()
    try:
        stored = await handle.inspect(session_id)
    finally:
        await close()
    # ``inspect`` shows the log as a crash repair would: the open turn is closed with
    # synthesized events. The stored pair itself must need no repair.
    synthesized = len(stored.repair.synthesized)
    types = [e.type for e in stored.events][: len(stored.events) - synthesized]
    assert stored.repair.unmatched_approvals == (), stored.repair
    assert stored.repair.synthesized == ("tool/result", "step/end", "turn/end"), stored.repair
    assert types[-3:] == ["tool/call", "approval/asked", "approval/decided"], types


def store_for(kind: str, base: str) -> tuple[Any, Callable[[Harness], Callable[[], Any]]]:
    """The ``store`` argument of ``Harness.open`` and a factory of fresh readers."""

    async def no_close() -> None:
        return None

    if kind == "memory":
        return "memory://", lambda h: lambda: (h.store.persistence, no_close)
    if kind == "jsonl":
        path = os.path.join(base, "jsonl-store")

        def jsonl_reader() -> tuple[Any, Any]:
            handle = JsonlPersistence(path)
            return handle, handle.close

        return f"jsonl://{path}", lambda h: jsonl_reader
    path = os.path.join(base, "tether.db")

    def sqlite_reader() -> tuple[Any, Any]:
        handle = SqlitePersistence(path)
        return handle, handle.close

    stores: dict[str, Any] = {
        "sqlite": "sqlite:///" + path,  # four slashes: an absolute path
        "sqlite-normal": SqlitePersistence(path, synchronous="NORMAL"),
        "sqlite-full-obj": SqlitePersistence(path),
    }
    return stores[kind], lambda h: sqlite_reader


def make_cycle(
    h: Harness, counts_model_calls: bool, ids: list[str]
) -> Callable[[], Awaitable[None]]:
    # Code from before ``SessionStore.commit`` (an A/B run against an older checkout) ended
    # ``Harness.run`` with ``flush``.
    commit = getattr(h.store, "commit", h.store.flush)

    async def cycle() -> None:
        tools_before, calls_before = Counters.tool_runs, Counters.model_calls
        session = h.new_root_session()
        agent = Agent(h.ctx, session, AgentOptions(h.model), tools=h.tools)
        remove = h.agents.register(agent)  # what Harness.agent_for does
        agent.followup(PROMPT)
        await h.settle()
        await commit(session)  # what Harness.run ends with
        result = agent.last_result
        assert result is not None and result.stop_reason == "completed", result
        assert result.output == "done", result
        assert Counters.tool_runs == tools_before + 1
        if counts_model_calls:
            assert Counters.model_calls == calls_before + 2
        await h.store.dispose(session)
        remove()
        ids.append(session.id)

    return cycle


async def verify(reader: Callable[[], Any], ids: list[str]) -> tuple[int, list[str]]:
    handle, close = reader()
    ok, types = 0, []
    try:
        for sid in ids:
            stored = await handle.inspect(sid)
            events = [(e.type, e.data) for e in stored.events]
            types = [t for t, _ in events]
            call, ask = types.index("tool/call"), types.index("approval/asked")
            decided, result = types.index("approval/decided"), types.index("tool/result")
            assert call < ask < decided < result, types
            assert events[decided][1]["outcome"] == "allowed-once", events[decided]
            assert events[decided][1]["id"] == events[ask][1]["id"]
            assert events[result][1]["content"] == "deleted /tmp/x", events[result]
            assert types.count("assistant/message") == 2, types
            ok += 1
    finally:
        await close()
    return ok, types


def count_syncs() -> Callable[[], int]:
    """Install the counting wrappers of ``--count-syncs``; returns the count so far."""
    counted = [0]

    def counting(real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            counted[0] += 1
            return real(*args, **kwargs)

        return call

    for name in ("fsync", "fdatasync"):
        setattr(os, name, counting(getattr(os, name)))
    committed = getattr(SqlitePersistence, "_committed", None)
    if committed is not None:

        def counting_commit(self: SqlitePersistence, sync: bool) -> None:
            if sync and self.synchronous == "FULL":
                counted[0] += 1
            committed(self, sync)

        SqlitePersistence._committed = counting_commit  # type: ignore[method-assign]
    else:  # code from before deferred commits: every commit is a FULL one
        for name in ("_append", "_create"):
            setattr(SqlitePersistence, name, counting(getattr(SqlitePersistence, name)))
    return lambda: counted[0]


async def measure(
    cycle: Callable[[], Awaitable[None]],
    n: int,
    warmup: int,
    budget_s: float,
    profile: cProfile.Profile | None = None,
    syncs: Callable[[], int] | None = None,
) -> tuple[list[int], list[int], float, int]:
    """Wall and CPU nanoseconds per cycle (GC enabled: a real process pays it), the RSS
    growth, and the syncs counted over the measured cycles."""
    await cycle()  # creates the store's files and the lease directory
    # The sandbox reuses what it derived from a directory once that directory has stood
    # unchanged for 2 s; this script created its store and workspace directories just now,
    # which a real store's are not.
    await asyncio.sleep(SETTLE_S)
    for _ in range(warmup - 1):
        await cycle()
    rss_after_warmup = rss_now_mib()
    wall: list[int] = []
    cpu: list[int] = []
    synced = syncs() if syncs is not None else 0
    start = time.monotonic()
    if profile is not None:
        profile.enable()
    while len(wall) < n and time.monotonic() - start < budget_s:
        c0, t0 = time.process_time_ns(), time.perf_counter_ns()
        await cycle()
        wall.append(time.perf_counter_ns() - t0)
        cpu.append(time.process_time_ns() - c0)
    if profile is not None:
        profile.disable()
    synced = syncs() - synced if syncs is not None else 0
    return wall, cpu, rss_now_mib() - rss_after_warmup, synced


def rss_now_mib() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def row(
    name: str, wall: list[int], cpu: list[int], growth: float, meta: dict[str, Any]
) -> dict[str, Any]:
    us = [s / 1000 for s in wall]
    cuts = statistics.quantiles(us, n=100, method="inclusive") if len(us) >= 2 else [us[0]] * 99
    return {
        "name": name,
        "n": len(us),
        "median_us": statistics.median(us),
        "p90_us": cuts[89],
        "p99_us": cuts[98],
        "min_us": min(us),
        "max_us": max(us),
        "mean_us": statistics.fmean(us),
        "cpu_median_us": statistics.median(c / 1000 for c in cpu),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "rss_growth_mib": growth,
        "python": platform.python_version(),
        "meta": meta,
    }


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=STORES, default="sqlite")
    parser.add_argument("--model", choices=["minimal", "scripted"], default="minimal")
    parser.add_argument("--dir", default=None, help="parent of the temporary store/workspace")
    parser.add_argument("--n", type=int, default=300, help="measured cycles (max)")
    parser.add_argument("--warmup", type=int, default=30, help="warm-up cycles")
    parser.add_argument("--budget-s", type=float, default=60.0, help="stop measuring after this")
    parser.add_argument(
        "--profile", metavar="FILE", help="cProfile the measured cycles into FILE (pstats)"
    )
    parser.add_argument(
        "--count-syncs", action="store_true", help="count the syncs tether asks for"
    )
    args = parser.parse_args()
    profile = cProfile.Profile() if args.profile else None
    syncs = count_syncs() if args.count_syncs else None

    base = tempfile.mkdtemp(prefix="tetherbench-", dir=args.dir)
    workspace = os.path.join(base, "ws")
    os.mkdir(workspace)
    store, readers = store_for(args.store, base)
    model = ScriptedToolModel() if args.model == "minimal" else scripted_model()
    name = f"tether {args.store}" + ("" if args.model == "minimal" else " scripted-model")
    meta: dict[str, Any] = {
        "tether": version("tether-agents"),
        "store": args.store,
        "model": args.model,
    }
    ids: list[str] = []
    try:
        async with Harness.open(
            workspace=workspace,
            model=model,
            store=store,
            sandbox="workspace-write",
            approval="ask",
            approver=approver,
            plugins=[PluginEntry(name="ask_tools", config={"tools": ["delete_file"]})],
        ) as h:
            reader = readers(h)
            h.tools.register(DeleteFile(reader))
            cycle = make_cycle(h, isinstance(model, ScriptedToolModel), ids)
            wall, cpu, growth, synced = await measure(
                cycle, args.n, args.warmup, args.budget_s, profile, syncs
            )
            if profile is not None:
                profile.dump_stats(args.profile)
            result = row(name, wall, cpu, growth, meta)
            if syncs is not None:
                result["syncs_per_cycle"] = synced / len(wall)
            print("RESULT " + json.dumps(result), flush=True)
            print(
                f"# {name}: n={result['n']} median={result['median_us']:.1f}us "
                f"p90={result['p90_us']:.1f}us p99={result['p99_us']:.1f}us "
                f"cpu={result['cpu_median_us']:.1f}us peakRSS={result['peak_rss_mib']:.1f}MiB",
                file=sys.stderr,
            )
            Counters.verify_in_tool = True
            for _ in range(3):
                await cycle()
            Counters.verify_in_tool = False
            ok, types = await verify(reader, ids)
        print(
            f"# {name}: verified {ok}/{len(ids)} sessions (audit pair before tool/result, "
            f"allowed-once); {Counters.checked_in_tool}/3 in-tool checks saw approval/decided "
            f"already stored; {len(types)} events/session: {types}",
            file=sys.stderr,
        )
        assert ok == len(ids)
        assert Counters.checked_in_tool == 3
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
