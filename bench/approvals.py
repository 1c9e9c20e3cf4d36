"""Answering an approval from another process: how fast the waiting agent resumes.

A root agent (scripted) runs in ``tether run --approval-from store --json`` and calls
``write`` under the ``ask_tools`` gate, so it waits on its approval socket. For each sample,
as soon as its ``approval/asked`` line appears, this process answers it:

- **end to end**: the real ``tether approvals answer ID allow`` command (includes its start-up
  and its read of the store), timed from ``approval/asked`` to ``approval/decided``;
- **pickup**: ``AnswerBox.deliver`` called here once the run's wait marker is up, timed from
  the call to ``approval/decided`` (the socket hand-over, the peer check and the durable
  decision).

The waiting run is a child of this process and the answer comes from this process or its
other child: an answer from a process the run itself started would be refused.

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

from tether.session._answer_box import AnswerBox
from tether.session._answer_channel import CLI_SURFACE

TETHER = str(Path(sys.executable).parent / "tether")


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
    )
    assert run.stdout is not None
    start = decided = 0.0
    async for raw in run.stdout:
        event = json.loads(raw)
        if event["type"] == "approval/asked":
            approval_id = str(event["data"]["id"])
            box = AnswerBox.for_store(store)
            while mode == "deliver" and not box.is_waited(approval_id):
                await asyncio.sleep(0.001)  # the run announces its socket just after asking
            start = time.perf_counter()
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
                )
                await answer.wait()
            else:
                box.deliver(approval_id, "allowed-once", CLI_SURFACE)
        elif event["type"] == "approval/decided":
            decided = time.perf_counter()
            break
    await run.communicate()
    if not decided:
        raise SystemExit(f"sample {index}: the run ended without deciding its approval")
    return decided - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=15)
    args = parser.parse_args()
    rows = []
    for mode, label in (
        ("cli", "end to end (tether approvals answer)"),
        ("deliver", "pickup (answer delivered → agent resumes)"),
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
