"""The tools layer's seams: its two services and the points one tool call passes through.

In the order the pipeline (:mod:`tether.tools.pipeline`) reaches them for one call:

- :data:`PRE_EXECUTE`, scoped to the calling agent, decides allow, deny or ask (fallback
  allow);
- :data:`TOOL_GUARD` runs every guard after an allow; any veto (a reason) denies, so listener
  order can never resurrect a forbidden call;
- :data:`ESCALATION_ASK` carries the approval request of a call that asks to run under a
  wider sandbox mode (fallback: the approval service decides);
- :data:`POST_EXECUTE` may accept (optionally replacing the result) or block it.

:data:`ESCALATION_ROUTED` tells the denial hint whether a plugin answers an agent's
escalations elsewhere (every listener says yes or no).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from tether.kernel import Gather, ServiceKey, Waterfall
from tether.policy import ApprovalOutcome, ApprovalRequest
from tether.tools.base import AgentLike, PostDecision, PreDecision, ToolCall, ToolResult

if TYPE_CHECKING:
    from tether.tools.jobs import JobManager
    from tether.tools.pipeline import ToolRuntime

TOOLS_SERVICE: Final[ServiceKey[ToolRuntime]] = ServiceKey("tools")
"""The tool registry and pipeline of a composition."""
JOBS_SERVICE: Final[ServiceKey[JobManager]] = ServiceKey("jobs")
"""The background jobs of ``bash`` (provided by the bash plugin)."""

PRE_EXECUTE: Final = Waterfall[ToolCall, PreDecision]("tools/pre-execute")
TOOL_GUARD: Final = Gather[ToolCall, str | None]("tools/guard")
POST_EXECUTE: Final = Waterfall[tuple[ToolCall, ToolResult], PostDecision]("tools/post-execute")
ESCALATION_ASK: Final = Waterfall[ApprovalRequest, ApprovalOutcome]("sandbox/escalation-ask")
ESCALATION_ROUTED: Final = Gather[AgentLike, bool]("sandbox/escalation-routed")

__all__ = [
    "ESCALATION_ASK",
    "ESCALATION_ROUTED",
    "JOBS_SERVICE",
    "POST_EXECUTE",
    "PRE_EXECUTE",
    "TOOLS_SERVICE",
    "TOOL_GUARD",
]
