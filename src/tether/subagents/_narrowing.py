"""Narrowing a running or stored child: the only way to change a child's scope, and it can
only get narrower.

Recorded as ``sandbox/mode {mode, source: "parent"}`` in the child's own log (so cold resume
replays it). A live child also gets a model-facing notice at its next step. Widening, or
narrowing a top-level session, is refused with a clear error.
"""

from __future__ import annotations

from typing import Final

from tether.agent import Agent
from tether.errors import TetherError
from tether.kernel import Context
from tether.policy import SANDBOX_POLICY_SERVICE, SandboxMode, parse_sandbox_mode
from tether.policy._events import SandboxModeSet
from tether.policy._modes import WIDER_MODES
from tether.policy._sandbox_policy import fold_sandbox_mode
from tether.session import Event, Persistence
from tether.session._session import wall_clock_ms

NOTICE_SOURCE: Final = {"kind": "plugin", "plugin": "subagents", "form": "notice"}


class NarrowingError(TetherError):
    code = "CANNOT_NARROW"


def _check(session_id: str, depth: int, current: SandboxMode | None, target: SandboxMode) -> bool:
    """True to write, False for a no-op; raises when the change would not narrow."""
    if depth == 0:
        raise NarrowingError(f"session {session_id} is not a subagent; use /permission instead")
    if current is None:
        # No recorded mode: the deployment default applies, which this process may not know.
        # Only read-only is narrower than (or equal to) every possible default.
        if target is not SandboxMode.READ_ONLY:
            raise NarrowingError(
                f"subagent {session_id} has no recorded sandbox mode; only read-only is "
                "guaranteed to narrow it"
            )
        return True
    if target is current:
        return False
    if target in WIDER_MODES[current]:
        raise NarrowingError(
            f'cannot widen subagent {session_id} from "{current.value}" to "{target.value}": '
            "a child's scope can only be narrowed"
        )
    return True


def narrow_live(ctx: Context, child: Agent, mode: SandboxMode | str) -> bool:
    """Narrow a live child agent. Returns False when it already is at ``mode``."""
    target = parse_sandbox_mode(mode)
    sandbox = ctx.get(SANDBOX_POLICY_SERVICE)
    if sandbox is None:
        raise NarrowingError("no sandbox policy service is composed")
    session = child.session
    current = sandbox.resolve(session).mode
    if not _check(session.id, session.header.delegation_depth, current, target):
        return False
    sandbox.set_sandbox_mode(session, target, source="parent")
    child.inject(
        f'Your delegating agent narrowed your sandbox to "{target.value}". Operations '
        "outside it will be denied; report any limitation in your reply.",
        source=NOTICE_SOURCE,
    )
    return True


async def narrow_stored(persistence: Persistence, session_id: str, mode: SandboxMode | str) -> bool:
    """Narrow a child that is not live in this process, by appending to its stored log.

    The log is read without repairing it: a log whose last turn is still open belongs to a
    child that is running (in some process) or was interrupted, and a durable repair would
    close a running turn under its owner. Such a child is refused; narrow it from the process
    that runs it, or after ``tether sessions fsck --repair``. If another process appends
    concurrently, the append fails with ``SEQ_CONFLICT`` and nothing is written.
    """
    target = parse_sandbox_mode(mode)
    stored = await persistence.inspect(session_id)
    current = fold_sandbox_mode(stored.events)
    if not _check(session_id, stored.header.delegation_depth, current, target):
        return False
    if stored.repair.changed:
        raise NarrowingError(
            f"subagent {session_id} has an unfinished turn or a damaged log (it is running, or "
            "was interrupted); narrow it from the process that runs it, or repair it first "
            "with `tether sessions fsck --repair`"
        )
    narrowed = SandboxModeSet(target, "parent")
    event = Event.make(narrowed.TYPE, len(stored.events), wall_clock_ms(), narrowed.to_data())
    await persistence.append(session_id, [event])
    return True
