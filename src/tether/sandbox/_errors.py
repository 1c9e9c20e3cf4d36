"""Errors the sandbox raises on purpose."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal, TypeAlias

from tether.errors import TetherError

SandboxErrorCode: TypeAlias = Literal[
    "REWRITABLE_PROGRAM", "SANDBOX_CONFIG", "STORE_UNPROTECTED", "WORKSPACE_HIDDEN"
]
"""The codes a :class:`SandboxError` may be raised with besides its own."""


class SandboxError(TetherError):
    code = "SANDBOX_ERROR"

    def __init__(self, message: str, *, code: SandboxErrorCode | None = None) -> None:
        super().__init__(message, code=code)


class SandboxUnavailableError(SandboxError):
    """No backend can enforce ``mode``, or the chosen one broke while starting a command.

    Raised *instead of* running anything: a restricted mode never falls back to an unconfined
    command. ``reasons`` maps each backend considered to why it could not be used.
    """

    code = "SANDBOX_UNAVAILABLE"

    def __init__(self, message: str, *, mode: str, reasons: Mapping[str, str] | None = None):
        super().__init__(message)
        self.mode = mode
        self.reasons: Mapping[str, str] = MappingProxyType(dict(reasons or {}))

    def to_dict(self) -> dict[str, object]:
        """The structured form (for ``--json`` surfaces and tool-result details)."""
        return {
            "code": self.code,
            "message": str(self),
            "mode": self.mode,
            "reasons": dict(self.reasons),
        }


__all__ = ["SandboxError", "SandboxErrorCode", "SandboxUnavailableError"]
