"""The approval cycle, this checkout against another, interleaved; and the syncs it costs.

    .venv/bin/python bench/cycle.py --base /tmp/base/src [--rounds 6] [--n 300]
    .venv/bin/python bench/cycle.py                       # this checkout alone

One round runs ``bench/peer_cycle.py`` (the approval round trip of the peer comparison: a
fresh root session, two model calls, the gated tool, the audit pair, settle, commit, dispose)
once per store and side, each in a fresh process: this checkout, then the ``--base`` source
tree first on ``PYTHONPATH`` (a ``git archive`` of the commit to compare with), then the next
store. Sides alternate inside every round, so a machine that gets busier or quieter moves
both alike. ``memory`` runs only where the code has it.

It prints, per store and side: the median of the rounds' medians (wall, µs per cycle), their
spread (lowest and highest round median), the median CPU time per cycle (all threads of the
process: steadier than the wall clock on a shared machine), and the ratios this/base and
memory/sqlite. Then the syncs per cycle: with ``strace``, the ``fsync`` and ``fdatasync``
calls of two runs (10 and 40 cycles) differenced, as the peer comparison counts them;
without it, the durable commits and syncs tether itself issues, counted in the process
(``peer_cycle.py --count-syncs``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
CYCLE = HERE / "peer_cycle.py"
SMALL, LARGE = 10, 40


@dataclass
class Side:
    name: str
    pythonpath: str | None
    medians: dict[str, list[float]] = field(default_factory=dict)
    cpus: dict[str, list[float]] = field(default_factory=dict)


def environment(side: Side) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TETHER_SRC"}  # it would pick the code
    if side.pythonpath:
        env["PYTHONPATH"] = side.pythonpath
    return env


def run(side: Side, store: str, args: list[str], workdir: str) -> dict[str, object] | None:
    env = environment(side)
    done = subprocess.run(
        [sys.executable, str(CYCLE), "--store", store, "--dir", workdir, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    if done.returncode != 0:
        if store == "memory" and "invalid store URL 'memory://'" in done.stderr:
            return None  # code from before the in-memory store
        raise SystemExit(f"{side.name} {store} failed:\n{done.stderr[-4000:]}")
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    result: dict[str, object] = json.loads(line[len("RESULT ") :])
    return result


def syncs_by_strace(side: Side, store: str, workdir: str) -> float:
    counts = []
    for n in (SMALL, LARGE):
        with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
            env = environment(side)
            trace = ["strace", "-f", "-c", "-e", "trace=fsync,fdatasync", "-o", out.name]
            cycles = ["--store", store, "--dir", workdir, "--n", str(n), "--warmup", "3"]
            subprocess.run(
                [*trace, sys.executable, str(CYCLE), *cycles],
                capture_output=True,
                env=env,
                check=True,
                timeout=900,
            )
            calls = 0
            for row in out.read().splitlines():
                tokens = row.split()
                if tokens and tokens[-1] in ("fsync", "fdatasync"):
                    calls += int(tokens[3])
            counts.append(calls)
    return (counts[1] - counts[0]) / (LARGE - SMALL)


def syncs_counted(side: Side, store: str, workdir: str) -> float:
    result = run(side, store, ["--n", str(LARGE), "--warmup", "3", "--count-syncs"], workdir)
    assert result is not None
    return float(result["syncs_per_cycle"])  # type: ignore[arg-type]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="a source tree (its src/) to compare with")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--n", type=int, default=300, help="measured cycles per run")
    parser.add_argument("--stores", default="sqlite,memory")
    parser.add_argument("--dir", help="parent of the runs' stores (default: a temp dir)")
    parser.add_argument("--no-syncs", action="store_true", help="skip counting the syncs")
    args = parser.parse_args()

    sides = [Side("this", None)]
    if args.base:
        sides.append(Side("base", str(Path(args.base).resolve())))
    stores = args.stores.split(",")
    workdir = args.dir or tempfile.mkdtemp(prefix="tether-cycle-")
    try:
        for index in range(args.rounds):
            order = sides if index % 2 == 0 else sides[::-1]
            for store in stores:
                for side in order:
                    result = run(side, store, ["--n", str(args.n)], workdir)
                    if result is None:
                        continue
                    side.medians.setdefault(store, []).append(float(result["median_us"]))  # type: ignore[arg-type]
                    side.cpus.setdefault(store, []).append(float(result["cpu_median_us"]))  # type: ignore[arg-type]
            print(f"# round {index + 1}/{args.rounds} done", file=sys.stderr)
        print(
            f"{'store':<8} {'side':<5} {'median µs':>10} {'spread µs':>17} {'cpu µs':>8} {'rounds':>6}"
        )
        for store in stores:
            for side in sides:
                medians = side.medians.get(store)
                if not medians:
                    continue
                spread = f"{min(medians):,.0f}–{max(medians):,.0f}"
                print(
                    f"{store:<8} {side.name:<5} {statistics.median(medians):>10,.0f} "
                    f"{spread:>17} {statistics.median(side.cpus[store]):>8,.0f} {len(medians):>6}"
                )
        this = sides[0]
        for store in stores:
            if len(sides) > 1 and store in this.medians and store in sides[1].medians:
                base = sides[1]
                print(
                    f"ratio {store}: this/base wall "
                    f"{statistics.median(this.medians[store]) / statistics.median(base.medians[store]):.2f}, "
                    f"cpu {statistics.median(this.cpus[store]) / statistics.median(base.cpus[store]):.2f}"
                )
        if "memory" in this.medians and "sqlite" in this.medians:
            print(
                "ratio this: memory/sqlite wall "
                f"{statistics.median(this.medians['memory']) / statistics.median(this.medians['sqlite']):.2f}"
            )
        if not args.no_syncs:
            count = syncs_by_strace if shutil.which("strace") else syncs_counted
            how = "strace: fsync + fdatasync" if shutil.which("strace") else "counted in-process"
            for store in stores:
                for side in sides:
                    if store in side.medians:
                        print(
                            f"syncs per cycle ({how}), {store} {side.name}: "
                            f"{count(side, store, workdir):.2f}"
                        )
    finally:
        if not args.dir:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
