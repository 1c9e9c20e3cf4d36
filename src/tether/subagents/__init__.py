"""Delegation: child composition, one-shot and continuable drivers, tools, workflow API."""

from tether.subagents import workflow
from tether.subagents.composition import (
    DEFAULT_MAX_DEPTH,
    DELEGATION_CONTEXT_NAME,
    DELEGATION_CONTEXT_ORDER,
    DELEGATION_TEXT,
    DelegatedPolicy,
    SubagentDepthError,
    SubagentError,
    ToolFilter,
    append_delegated_policy_overrides,
    apply_child_composition,
    capture_delegated_policy_overrides,
    child_session_meta,
    delegation_depth_of,
    resolve_child_depth,
)
from tether.subagents.continuation import (
    SUBAGENTS_SERVICE,
    AncestorAuthority,
    ContinuationManager,
    UserAuthority,
)
from tether.subagents.descriptor import Descriptor, fold_descriptor
from tether.subagents.oneshot import OneShotRequest, run_one_shot
from tether.subagents.results import SubagentResult

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DELEGATION_CONTEXT_NAME",
    "DELEGATION_CONTEXT_ORDER",
    "DELEGATION_TEXT",
    "SUBAGENTS_SERVICE",
    "AncestorAuthority",
    "ContinuationManager",
    "DelegatedPolicy",
    "Descriptor",
    "OneShotRequest",
    "SubagentDepthError",
    "SubagentError",
    "SubagentResult",
    "ToolFilter",
    "UserAuthority",
    "append_delegated_policy_overrides",
    "apply_child_composition",
    "capture_delegated_policy_overrides",
    "child_session_meta",
    "delegation_depth_of",
    "fold_descriptor",
    "resolve_child_depth",
    "run_one_shot",
    "workflow",
]
