"""tether: an agent harness whose subagents act only within the scope fixed at delegation.

The names a user of the Python API needs are here; everything else is for plugin authors (the
subpackages) or private. The front door is :class:`Harness`::

    async with Harness.open(workspace=".", sandbox="workspace-write") as harness:
        result = await harness.run("fix the failing test")

The names are imported on first use, so that ``import tether`` stays cheap for the command
line and for plugins.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Final

__version__ = "0.1.0"

if TYPE_CHECKING:
    from tether.errors import TetherError
    from tether.harness import ApproverFn, Harness, RunResult, SessionEvent
    from tether.kernel.config import PluginEntry
    from tether.kernel.workspace_trust import WorkspaceTrust
    from tether.policy.approval import ApprovalRequest
    from tether.policy.modes import ApprovalOutcome, ApprovalPolicy, SandboxMode
    from tether.session.persistence.base import Persistence
    from tether.session.persistence.factory import open_persistence
    from tether.session.persistence.jsonl import JsonlPersistence
    from tether.session.persistence.sqlite import SqlitePersistence
    from tether.tools.base import Tool, ToolArgs, ToolCall, ToolResult

_HOMES: Final[dict[str, str]] = {
    "ApprovalOutcome": "tether.policy.modes",
    "ApprovalPolicy": "tether.policy.modes",
    "ApprovalRequest": "tether.policy.approval",
    "ApproverFn": "tether.harness",
    "Harness": "tether.harness",
    "JsonlPersistence": "tether.session.persistence.jsonl",
    "Persistence": "tether.session.persistence.base",
    "PluginEntry": "tether.kernel.config",
    "RunResult": "tether.harness",
    "SandboxMode": "tether.policy.modes",
    "SessionEvent": "tether.harness",
    "SqlitePersistence": "tether.session.persistence.sqlite",
    "TetherError": "tether.errors",
    "Tool": "tether.tools.base",
    "ToolArgs": "tether.tools.base",
    "ToolCall": "tether.tools.base",
    "ToolResult": "tether.tools.base",
    "WorkspaceTrust": "tether.kernel.workspace_trust",
    "open_persistence": "tether.session.persistence.factory",
}
"""Where each public name is defined (its one home)."""

__all__ = [
    "ApprovalOutcome",
    "ApprovalPolicy",
    "ApprovalRequest",
    "ApproverFn",
    "Harness",
    "JsonlPersistence",
    "Persistence",
    "PluginEntry",
    "RunResult",
    "SandboxMode",
    "SessionEvent",
    "SqlitePersistence",
    "TetherError",
    "Tool",
    "ToolArgs",
    "ToolCall",
    "ToolResult",
    "WorkspaceTrust",
    "__version__",
    "open_persistence",
]


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'tether' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # imported once
    return value
