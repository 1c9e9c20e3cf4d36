"""Answering an approval from another process: how fast the waiting agent resumes.

A root agent (scripted) calls ``write`` under the ``ask_tools`` gate with the
``approval_from_store`` answerer, so the run waits for an answer in the store's answer box.
For each sample, as soon as ``approval/asked`` is appended, another process answers it:

- **end to end**: the real ``tether approvals answer ID allow`` command (includes its start-up
  and its read of the store), timed from ``approval/asked`` to ``approval/decided``;
- **pickup**: a minimal process that drops the answer with ``AnswerBox.put`` and reports when
  it did; timed from that moment to ``approval/decided`` (the waiting agent's polling latency).

Run: ``.venv/bin/python bench/approvals.py [--samples N]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tether.harness import Harness
from tether.kernel import PluginEntry

TETHER = str(Path(sys.executable).parent / "tether")
PUT = (
    "import sys, time\n"
    "from tether.session.answer_box import AnswerBox\n"
    "AnswerBox.for_store(sys.argv[1]).put(sys.argv[2], 'allowed-once', 'bench')\n"
    "print(time.time())\n"
)


async def sample(base: Path, index: int, mode: str) -> float:
    workspace = base / f"ws{index}"
    workspace.mkdir()
    script = base / f"s{index}.json"
    script.write_text(
        json.dumps(
            {
                "agents": [
                    {
                        "steps": [
                            {
                                "tool_calls": [
                                    {
                                        "name": "write",
                                        "arguments": {"path": "a.txt", "content": "a"},
                                    }
                                ]
                            },
                            {"text": "ok"},
                        ]
                    }
                ]
            }
        )
    )
    store = f"sqlite:///{base / 'bench.db'}"
    marks: dict[str, float] = {}
    async with Harness.open(
        workspace=workspace,
        model=f"scripted:{script}",
        store=store,
        plugins=[
            PluginEntry(name="ask_tools", config={"tools": ["write"]}),
            PluginEntry(name="approval_from_store", config={"store": store}),
        ],
    ) as harness:
        answering: list[asyncio.Task[Any]] = []

        def on_event(_session: Any, event: Any) -> None:
            if event.type == "approval/asked":
                marks["asked"] = time.time()
                answering.append(
                    asyncio.ensure_future(answer(store, str(event.data["id"]), mode, marks))
                )
            elif event.type == "approval/decided":
                marks["decided"] = time.time()

        harness.store.on_event(on_event)
        await harness.run("write")
        await asyncio.gather(*answering)
    start = marks["asked"] if mode == "cli" else marks["answered"]
    return marks["decided"] - start


async def answer(store: str, approval_id: str, mode: str, marks: dict[str, float]) -> None:
    argv = (
        [TETHER, "approvals", "answer", approval_id, "allow", "--store", store]
        if mode == "cli"
        else [sys.executable, "-c", PUT, store, approval_id]
    )
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    if mode == "put":
        marks["answered"] = float(out.decode().strip())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=15)
    args = parser.parse_args()
    rows = []
    for mode, label in (
        ("cli", "end to end (tether approvals answer)"),
        ("put", "pickup (answer written → agent resumes)"),
    ):
        with tempfile.TemporaryDirectory() as tmp:
            values = [asyncio.run(sample(Path(tmp), i, mode)) * 1000 for i in range(args.samples)]
        ordered = sorted(values)
        p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
        rows.append((label, statistics.median(values), p99))
    print(f"approval answered from another process, {args.samples} samples each")
    print(f"{'path':<44}{'median ms':>12}{'p99 ms':>10}")
    for label, median, p99 in rows:
        print(f"{label:<44}{median:>12.1f}{p99:>10.1f}")
    print(
        "target: median under 200 ms from approval/asked to the agent resuming, answered by "
        f"`tether approvals answer` in another process: {'met' if rows[0][1] < 200 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
