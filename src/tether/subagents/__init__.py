"""Delegation: child composition, one-shot and continuable drivers, tools, workflow API."""

from tether.subagents import workflow
from tether.subagents.composition import (
    DEFAULT_MAX_DEPTH,
    DELEGATION_CONTEXT_NAME,
    DELEGATION_CONTEXT_ORDER,
    DELEGATION_TEXT,
    ChildSpec,
    PreparedChild,
    SubagentDepthError,
    SubagentError,
    child_session_meta,
    compose_child_agent,
    delegation_depth_of,
    prepare_child,
    resolve_child_depth,
)
from tether.subagents.continuation import (
    SUBAGENTS_SERVICE,
    AncestorAuthority,
    ContinuationManager,
    UserAuthority,
)
from tether.subagents.descriptor import fold_descriptor
from tether.subagents.events import Descriptor, ToolFilter
from tether.subagents.oneshot import OneShotRequest, run_child, run_one_shot
from tether.subagents.results import SubagentResult

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DELEGATION_CONTEXT_NAME",
    "DELEGATION_CONTEXT_ORDER",
    "DELEGATION_TEXT",
    "SUBAGENTS_SERVICE",
    "AncestorAuthority",
    "ChildSpec",
    "ContinuationManager",
    "Descriptor",
    "OneShotRequest",
    "PreparedChild",
    "SubagentDepthError",
    "SubagentError",
    "SubagentResult",
    "ToolFilter",
    "UserAuthority",
    "child_session_meta",
    "compose_child_agent",
    "delegation_depth_of",
    "fold_descriptor",
    "prepare_child",
    "resolve_child_depth",
    "run_child",
    "run_one_shot",
    "workflow",
]
