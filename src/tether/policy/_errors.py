"""Errors the policy layer raises on purpose, each with a stable ``code``."""

from __future__ import annotations

from tether.errors import TetherError


class PolicyError(TetherError):
    code = "POLICY_ERROR"


class InvalidModeError(PolicyError):
    """A sandbox mode outside the closed vocabulary (config, a write, or a stored event)."""

    code = "INVALID_MODE"


class InvalidPolicyError(PolicyError):
    """An approval policy outside the closed vocabulary."""

    code = "INVALID_POLICY"


class InvalidSourceError(PolicyError):
    """A ``source`` on a policy event outside the closed vocabulary."""

    code = "INVALID_POLICY_SOURCE"


class InvalidPolicyEventError(PolicyError):
    """A stored policy event whose payload does not fit its definition (``policy/_events.py``)
    in a field other than the mode, the policy or the source, which keep their own codes."""

    code = "INVALID_POLICY_EVENT"


class InvalidPolicyConfigError(PolicyError):
    """A policy service was configured with a value it cannot use (say, a negative timeout)."""

    code = "INVALID_POLICY_CONFIG"


class ApprovalOutsideTurnError(PolicyError):
    """An approval was requested while the session had no open turn; nothing was appended."""

    code = "APPROVAL_OUTSIDE_TURN"


class UnknownPresetError(PolicyError):
    code = "UNKNOWN_PRESET"


class PresetTableError(PolicyError):
    """A preset table that cannot be used (empty, a reserved name, a bad row)."""

    code = "INVALID_PRESET_TABLE"


class InvalidPermissionRuleError(PolicyError):
    """A permission rule (``allow``/``ask``/``deny``) that is not a rule at all, or a
    ``[permissions]`` table of the wrong shape; the message names the file."""

    code = "INVALID_PERMISSION_RULE"


class RuleStoreError(PolicyError):
    """The user's file of ``allowed-always`` rules cannot be read or written safely; the
    message names the path."""

    code = "RULE_STORE"


class GrantNotFoundError(PolicyError):
    """No grant or rule has the id given to revoke (or it was revoked already)."""

    code = "GRANT_NOT_FOUND"


class CannotRevokeError(PolicyError):
    """A grant of a stored session cannot be revoked from here: its log has an unfinished
    turn (it is running somewhere, or was interrupted) or is damaged."""

    code = "CANNOT_REVOKE"


class PolicyServiceUnavailableError(PolicyError):
    """A service this one needs at the moment of use is not composed (any more)."""

    code = "POLICY_SERVICE_UNAVAILABLE"


__all__ = [
    "ApprovalOutsideTurnError",
    "CannotRevokeError",
    "GrantNotFoundError",
    "InvalidModeError",
    "InvalidPermissionRuleError",
    "InvalidPolicyConfigError",
    "InvalidPolicyError",
    "InvalidPolicyEventError",
    "InvalidSourceError",
    "PolicyError",
    "PolicyServiceUnavailableError",
    "PresetTableError",
    "RuleStoreError",
    "UnknownPresetError",
]
