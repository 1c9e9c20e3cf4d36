"""tether: an agent harness whose subagents act only within the scope fixed at delegation.

The names a user of the Python API needs are here; everything else is for plugin authors (the
subpackages) or private. The front door is :class:`Harness`::

    async with Harness.open(workspace=".", sandbox="workspace-write") as harness:
        result = await harness.run("fix the failing test")

The names are imported on first use, so that ``import tether`` stays cheap for the command
line and for plugins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from tether._lazy_names import lazy_names

__version__ = "0.1.0"

if TYPE_CHECKING:
    from tether._harness import ApproverFn, Harness, RunResult, SessionEvent
    from tether.errors import TetherError
    from tether.kernel._config import PluginEntry
    from tether.kernel._workspace_trust import WorkspaceTrust
    from tether.policy._approval import Answer, ApprovalRequest
    from tether.policy._modes import ApprovalOutcome, ApprovalPolicy, SandboxMode
    from tether.session.persistence._base import Persistence
    from tether.session.persistence._factory import open_persistence
    from tether.session.persistence._jsonl import JsonlPersistence
    from tether.session.persistence._memory import MemoryPersistence
    from tether.session.persistence._sqlite import SqlitePersistence
    from tether.tools._base import Tool, ToolArgs, ToolCall, ToolResult

_HOMES: Final[dict[str, str]] = {
    "Answer": "tether.policy._approval",
    "ApprovalOutcome": "tether.policy._modes",
    "ApprovalPolicy": "tether.policy._modes",
    "ApprovalRequest": "tether.policy._approval",
    "ApproverFn": "tether._harness",
    "Harness": "tether._harness",
    "JsonlPersistence": "tether.session.persistence._jsonl",
    "MemoryPersistence": "tether.session.persistence._memory",
    "Persistence": "tether.session.persistence._base",
    "PluginEntry": "tether.kernel._config",
    "RunResult": "tether._harness",
    "SandboxMode": "tether.policy._modes",
    "SessionEvent": "tether._harness",
    "SqlitePersistence": "tether.session.persistence._sqlite",
    "TetherError": "tether.errors",
    "Tool": "tether.tools._base",
    "ToolArgs": "tether.tools._base",
    "ToolCall": "tether.tools._base",
    "ToolResult": "tether.tools._base",
    "WorkspaceTrust": "tether.kernel._workspace_trust",
    "open_persistence": "tether.session.persistence._factory",
}
"""Where each public name is defined (its one home)."""

__all__ = [
    "Answer",
    "ApprovalOutcome",
    "ApprovalPolicy",
    "ApprovalRequest",
    "ApproverFn",
    "Harness",
    "JsonlPersistence",
    "MemoryPersistence",
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


__getattr__ = lazy_names(__name__, _HOMES)
