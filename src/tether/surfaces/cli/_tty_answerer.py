"""The terminal answerer: ``tether run`` asks the person at the keyboard.

Used when stdin is a terminal and no ``--approver`` is given. It shows the question of
:mod:`tether.surfaces.cli._approval_prompt` (tether's facts first, then what the agent wrote,
escaped and in full), then reads one line: ``a``/``allow``/``y`` allows once; when the
question offers grants, ``s`` allows for the session and ``w`` always, with the scope a number
after it picks (:mod:`tether.surfaces.cli._grant_choice`); ``r``, ``reject``, ``n`` or an
empty line rejects (the safe default); end of input is ``unavailable``. Questions are asked
one at a time.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import TextIO

from tether.kernel import Context, Disposable, Next
from tether.kernel._printable import printable
from tether.policy._approval import ApprovalReply, ApprovalRequest, register_answerer
from tether.policy._events import GrantScope
from tether.policy._modes import SandboxMode
from tether.surfaces.cli._approval_prompt import question_lines, session_mode
from tether.surfaces.cli._grant_choice import grant_answer, grant_labels, grant_lines
from tether.tools._ask_user import USER_QUESTION, QuestionRequest

ALLOW = frozenset({"a", "allow", "y", "yes"})
REJECT = frozenset({"", "r", "reject", "n", "no"})


def describe(request: ApprovalRequest, current: SandboxMode | None) -> list[str]:
    """The question for ``request``; ``current`` is the asking session's sandbox mode."""
    origin = request.origin
    session = (origin.child if origin is not None else request.agent).session
    depth = session.header.delegation_depth
    asker = [f"  asked by: session {session.id[:8]} (depth {depth})"]
    if origin is not None:
        chain = " ← ".join(s[:8] for s in origin.lineage)
        asker = [
            f"  asked by: subagent {origin.child_session_id[:8]} (depth {depth}), routed to "
            f"this session {request.agent.session.id[:8]}",
            f"  lineage: {chain}",
        ]
    return question_lines(request, asker, current)


def parse_reply(reply: str | None) -> str:
    if reply is None:
        return "unavailable"
    word = reply.strip().lower()
    if word in ALLOW:
        return "allowed-once"
    if word in REJECT:
        return "rejected"
    return "retry"


def register_tty_answerer(
    ctx: Context,
    *,
    read_line: Callable[[], str | None] | None = None,
    out: TextIO | None = None,
) -> Disposable:
    lock = asyncio.Lock()
    output = out or sys.stderr
    reader = read_line or _read_stdin

    async def answer(request: ApprovalRequest, _next: Next[ApprovalReply]) -> ApprovalReply:
        async with lock:
            for line in [*describe(request, session_mode(ctx, request)), *grant_lines(request)]:
                print(line, file=output)
            choices = "   ".join(["[a] Allow once", *grant_labels(request), "[r] Reject (default)"])
            while True:
                print(f"  {choices} > ", end="", file=output, flush=True)
                reply = await asyncio.to_thread(reader)
                granted = grant_answer(reply or "", request) if reply is not None else None
                if granted is not None:
                    assert isinstance(granted.scope, GrantScope)
                    print(
                        f"  → {granted.outcome}: {printable(granted.scope.describe())}", file=output
                    )
                    return granted
                outcome = parse_reply(reply)
                if outcome != "retry":
                    print(f"  → {outcome}", file=output)
                    return outcome

    async def question(request: QuestionRequest, _next: Next[str | None]) -> str | None:
        async with lock:
            print(f"Question from the agent: {printable(request.question)}", file=output)
            print("  answer > ", end="", file=output, flush=True)
            reply = await asyncio.to_thread(reader)
            return None if reply is None else reply.strip()

    ctx.on(USER_QUESTION, question)
    return register_answerer(ctx, answer)


def _read_stdin() -> str | None:
    line = sys.stdin.readline()
    return line if line else None
