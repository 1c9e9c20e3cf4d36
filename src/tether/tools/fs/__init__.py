"""The file tools (``read``, ``write``, ``edit``, ``ls``, ``glob``, ``grep``) and their fence.

Writes are fenced in-process by the call's sandbox mode (see :mod:`tether.tools.fs.fence`);
reads are allowed everywhere, bounded in size, and refuse binary content.
"""

from __future__ import annotations

from tether.tools.base import Tool
from tether.tools.fs.edit import EditArgs, EditTool
from tether.tools.fs.fence import (
    DANGER_FULL_ACCESS,
    NO_POLICY_REASON,
    READ_ONLY,
    WORKSPACE_WRITE,
    FencePolicy,
    FileToolError,
    SandboxDenied,
    denial_marker,
    plan_write,
    sandbox_denial,
)
from tether.tools.fs.grep import GrepArgs, GrepTool
from tether.tools.fs.listing import GlobArgs, GlobTool, LsArgs, LsTool
from tether.tools.fs.read import ReadArgs, ReadTool
from tether.tools.fs.write import WriteArgs, WriteTool


def file_tools() -> list[Tool]:
    """One instance of each file tool with default limits, in a stable order."""
    return [ReadTool(), WriteTool(), EditTool(), LsTool(), GlobTool(), GrepTool()]


__all__ = [
    "DANGER_FULL_ACCESS",
    "NO_POLICY_REASON",
    "READ_ONLY",
    "WORKSPACE_WRITE",
    "EditArgs",
    "EditTool",
    "FencePolicy",
    "FileToolError",
    "GlobArgs",
    "GlobTool",
    "GrepArgs",
    "GrepTool",
    "LsArgs",
    "LsTool",
    "ReadArgs",
    "ReadTool",
    "SandboxDenied",
    "WriteArgs",
    "WriteTool",
    "denial_marker",
    "file_tools",
    "plan_write",
    "sandbox_denial",
]
