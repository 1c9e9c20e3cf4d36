"""Delegation: child composition, one-shot and continuable drivers, tools, workflow API."""

from tether.subagents import workflow
from tether.subagents._composition import ChildSpec, SubagentError
from tether.subagents._continuation import SUBAGENTS_SERVICE
from tether.subagents._events import Descriptor, ToolFilter
from tether.subagents._results import SubagentResult

__all__ = [
    "SUBAGENTS_SERVICE",
    "ChildSpec",
    "Descriptor",
    "SubagentError",
    "SubagentResult",
    "ToolFilter",
    "workflow",
]
