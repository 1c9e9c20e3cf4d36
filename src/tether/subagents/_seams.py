"""The subagents layer's notices: a child's lifecycle.

:data:`SUBAGENT_START` and :data:`SUBAGENT_END` are notified scoped to the delegating parent,
when a child is published and when it has ended (hook bridges map them to ``SubagentStart``
and ``SubagentStop``). The continuation manager's key, :data:`SUBAGENTS_SERVICE`, lives beside
the manager (:mod:`tether.subagents._continuation`), which notifies these.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from tether.kernel import Notice

if TYPE_CHECKING:
    from tether.subagents._lifecycle import SubagentLifecycle

SUBAGENT_START: Final[Notice[SubagentLifecycle]] = Notice("subagent/start")
SUBAGENT_END: Final[Notice[SubagentLifecycle]] = Notice("subagent/end")

__all__ = ["SUBAGENT_END", "SUBAGENT_START"]
