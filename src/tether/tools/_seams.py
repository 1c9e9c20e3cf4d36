"""The points one tool call passes through (the registry's key, :data:`TOOLS_SERVICE`, lives
beside the registry in :mod:`tether.tools._pipeline`, which reaches these).

In the order the pipeline (:mod:`tether.tools._pipeline`) reaches them for one call:

- :data:`PRE_EXECUTE`, scoped to the calling agent, decides allow, deny or ask (fallback
  allow);
- :data:`TOOL_GUARD` runs every guard after an allow; any veto (a reason) denies, so listener
  order can never resurrect a forbidden call;
- :data:`POST_EXECUTE` may accept (optionally replacing the result) or block it.

The escalation ladder's own points (``sandbox/escalation-ask``, ``sandbox/escalation-routed``)
live beside it in :mod:`tether.policy._escalation`.
"""

from __future__ import annotations

from typing import Final

from tether.kernel import Gather, Waterfall
from tether.tools._base import PostDecision, PreDecision, ToolCall, ToolResult

PRE_EXECUTE: Final = Waterfall[ToolCall, PreDecision]("tools/pre-execute")
TOOL_GUARD: Final = Gather[ToolCall, str | None]("tools/guard")
POST_EXECUTE: Final = Waterfall[tuple[ToolCall, ToolResult], PostDecision]("tools/post-execute")

__all__ = [
    "POST_EXECUTE",
    "PRE_EXECUTE",
    "TOOL_GUARD",
]
