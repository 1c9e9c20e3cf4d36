"""The subagents layer's seams: the continuation manager and a child's lifecycle.

:data:`SUBAGENT_START` and :data:`SUBAGENT_END` are notified scoped to the delegating parent,
when a child is published and when it has ended (hook bridges map them to ``SubagentStart``
and ``SubagentStop``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from tether.kernel import Notice, ServiceKey

if TYPE_CHECKING:
    from tether.subagents.continuation import ContinuationManager
    from tether.subagents.lifecycle import SubagentLifecycle

SUBAGENTS_SERVICE: Final[ServiceKey[ContinuationManager]] = ServiceKey("subagents")
"""The continuable children of a composition (provided by the subagents plugin)."""

SUBAGENT_START: Final[Notice[SubagentLifecycle]] = Notice("subagent/start")
SUBAGENT_END: Final[Notice[SubagentLifecycle]] = Notice("subagent/end")

__all__ = ["SUBAGENTS_SERVICE", "SUBAGENT_END", "SUBAGENT_START"]
