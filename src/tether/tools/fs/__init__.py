"""The file tools (``read``, ``write``, ``edit``, ``ls``, ``glob``, ``grep``) and their fence.

Writes are fenced in-process by the call's sandbox mode (see :mod:`tether.tools.fs._fence`);
reads are allowed everywhere, bounded in size, and refuse binary content.
"""

from __future__ import annotations

from tether.tools._base import Tool
from tether.tools.fs._edit import EditTool
from tether.tools.fs._fence import FileToolError, SandboxDenied
from tether.tools.fs._grep import GrepTool
from tether.tools.fs._listing import GlobTool, LsTool
from tether.tools.fs._read import ReadTool
from tether.tools.fs._write import WriteTool


def file_tools() -> list[Tool]:
    """One instance of each file tool with default limits, in a stable order."""
    return [ReadTool(), WriteTool(), EditTool(), LsTool(), GlobTool(), GrepTool()]


__all__ = [
    "EditTool",
    "FileToolError",
    "GlobTool",
    "GrepTool",
    "LsTool",
    "ReadTool",
    "SandboxDenied",
    "WriteTool",
    "file_tools",
]
