"""Permission policy: sandbox modes and their resolution, the approval service, permission rules
and grants, presets.

Everything here is a fold over the session log plus a write path that appends one event; no
policy is held anywhere else (``docs/design.md`` §2, principle 1).
"""

from tether.policy._approval import (
    APPROVAL_PENDING,
    APPROVAL_REQUEST,
    APPROVAL_RESOLVED,
    APPROVAL_SERVICE,
    Answer,
    Answerer,
    ApprovalReply,
    ApprovalRequest,
    ApprovalResolved,
    ApprovalService,
    GrantChoices,
    register_answerer,
)
from tether.policy._errors import PolicyError
from tether.policy._events import GrantScope
from tether.policy._modes import (
    ApprovalOutcome,
    ApprovalPolicy,
    PolicySource,
    SandboxMode,
    is_strictly_wider,
    parse_approval_policy,
    parse_sandbox_mode,
)
from tether.policy._permissions import PERMISSION_RULES, PermissionRules
from tether.policy._presets import PERMISSION_PRESETS_SERVICE, PermissionPresetsService, Preset
from tether.policy._protocols import CanInject, HasSession
from tether.policy._sandbox_policy import (
    SANDBOX_POLICY_SERVICE,
    SandboxExecutionPolicy,
    SandboxPolicyService,
)

__all__ = [
    "APPROVAL_PENDING",
    "APPROVAL_REQUEST",
    "APPROVAL_RESOLVED",
    "APPROVAL_SERVICE",
    "PERMISSION_PRESETS_SERVICE",
    "PERMISSION_RULES",
    "SANDBOX_POLICY_SERVICE",
    "Answer",
    "Answerer",
    "ApprovalOutcome",
    "ApprovalPolicy",
    "ApprovalReply",
    "ApprovalRequest",
    "ApprovalResolved",
    "ApprovalService",
    "CanInject",
    "GrantChoices",
    "GrantScope",
    "HasSession",
    "PermissionPresetsService",
    "PermissionRules",
    "PolicyError",
    "PolicySource",
    "Preset",
    "SandboxExecutionPolicy",
    "SandboxMode",
    "SandboxPolicyService",
    "is_strictly_wider",
    "parse_approval_policy",
    "parse_sandbox_mode",
    "register_answerer",
]
