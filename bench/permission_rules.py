"""What permission rules and grants cost a tool call: CPU time per call of the approval
service's two steps that consult them.

- **screen** (every tool call, before its hooks): ``ApprovalService.screen`` for a ``bash``
  call whose command is compound (``cd src && make -j4 | tee log``), with no rules composed,
  and with N ``deny`` and N ``ask`` command-prefix rules that do not match (every rule is read;
  the worst case short of a refusal).
- **grant fold** (every ask of a top-level session that holds a grant): the session grants of
  a log of E events holding G grants, as ``decide`` reads them before asking anyone. A live
  session's fold is incremental (each ask folds only the events since the last one): the
  *per ask* rows; the *whole log* rows fold it from the start, as the first ask after a
  resume and ``tether grants list`` do.

CPU time (``time.process_time``) over many calls in one process, median of runs; nothing is
written or flushed (the screen finds no ``deny``, the fold only reads).

Run: ``.venv/bin/python bench/permission_rules.py [--calls N] [--runs R] [--rules N]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from tether.kernel._plugin import Kernel
from tether.policy._approval import APPROVAL_SERVICE, ApprovalRequest, approval_plugin
from tether.policy._events import ApprovalGranted, GrantScope
from tether.policy._grants import fold_grants, session_grants
from tether.policy._modes import ApprovalOutcome
from tether.policy._permissions import PERMISSION_RULES, PermissionRules
from tether.policy._rules import RuleOrigin, parse_rule
from tether.policy._sandbox_policy import sandbox_policy_plugin
from tether.session import Session, SessionHeader

COMMAND = "cd src && make -j4 | tee log"


class Owner:
    def __init__(self, session: Session) -> None:
        self.session = session


def screen_cpu(calls: int, rules: int, workdir: Path) -> float:
    """CPU seconds per ``screen`` call."""
    kernel = Kernel()
    kernel.load(sandbox_policy_plugin, {"mode": "workspace-write", "workspace_root": str(workdir)})
    kernel.load(approval_plugin, {"policy": "ask"})
    if rules:
        configured = [
            parse_rule(f"Bash(tool{i} --flag:*)", decision, RuleOrigin.USER, file="bench.toml")
            for i in range(rules)
            for decision in ("deny", "ask")
        ]
        kernel.ctx.provide(PERMISSION_RULES, PermissionRules(configured))
    service = kernel.ctx.require(APPROVAL_SERVICE)
    session = Session(SessionHeader("s", 0, cwd=str(workdir)))
    session.append("turn/start", {"turn": 1})
    request = ApprovalRequest(
        Owner(session), "bash", call_id="c", action={"tool": "bash", "command": COMMAND}
    )

    async def loop() -> float:
        start = time.process_time()
        for _ in range(calls):
            screened = await service.screen(request)
            assert screened.denied is None and screened.ask is None
        return (time.process_time() - start) / calls

    return asyncio.run(loop())


def fold_cpu(events: int, grants: int, calls: int, *, whole: bool) -> float:
    """CPU seconds per grant fold of a log of ``events`` events holding ``grants`` grants:
    the live session's (incremental), or the whole log's."""
    session = Session(SessionHeader("s", 0, cwd="/ws"))
    every = max(1, events // max(grants, 1))
    for i in range(events):
        if grants and i % every == 0 and i // every < grants:
            grant = ApprovalGranted(
                f"g{i}",
                f"a{i}",
                ApprovalOutcome.ALLOWED_FOR_SESSION,
                GrantScope("prefix", f"Bash(tool{i}:*)"),
            )
            session.append(grant.TYPE, grant.to_data())
        else:
            session.append("step/start", {"step": i})
    session_grants(session)  # the first fold of a live session reads it all
    start = time.process_time()
    for _ in range(calls):
        if whole:
            fold_grants(session.header, session.events)
        else:
            session.append("step/end", {})  # an event since the last ask
            session_grants(session)
    return (time.process_time() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rules", type=int, default=20)
    args = parser.parse_args()
    rows: list[tuple[str, list[float]]] = [
        ("screen, no rules", []),
        (f"screen, {args.rules} deny + {args.rules} ask", []),
        ("grant fold per ask, 10000 events, 50", []),
        ("grant fold, whole log, 1000 events, 5", []),
        ("grant fold, whole log, 10000 events, 50", []),
    ]
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            rows[0][1].append(screen_cpu(args.calls, 0, Path(tmp)))
            rows[1][1].append(screen_cpu(args.calls, args.rules, Path(tmp)))
        rows[2][1].append(fold_cpu(10000, 50, args.calls, whole=False))
        rows[3][1].append(fold_cpu(1000, 5, max(1, args.calls // 20), whole=True))
        rows[4][1].append(fold_cpu(10000, 50, max(1, args.calls // 200), whole=True))
    print(f"permission rules and grants, CPU per call, median of {args.runs} runs (min-max)")
    print(f"{'step':<40}{'µs':>10}{'spread':>22}")
    for name, samples in rows:
        spread = f"{min(samples) * 1e6:.1f}-{max(samples) * 1e6:.1f}"
        print(f"{name:<40}{statistics.median(samples) * 1e6:>10.1f}{spread:>22}")


if __name__ == "__main__":
    main()
