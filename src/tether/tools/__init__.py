"""The tool seam: what a plugin author needs to write a tool or to hook the tool pipeline.

A tool is a :class:`Tool` (a name, a pydantic :class:`ToolArgs` model, an ``execute``)
registered with :data:`TOOLS_SERVICE`; :data:`PRE_EXECUTE`, :data:`TOOL_GUARD` and
:data:`POST_EXECUTE` are the points a plugin listens on around every call.
"""

from __future__ import annotations

from tether._signals import AbortedError, AbortSignal
from tether.tools._ask_user import USER_QUESTION, QuestionRequest
from tether.tools._base import PostDecision, PreDecision, Tool, ToolArgs, ToolCall, ToolResult
from tether.tools._jobs import JOBS_SERVICE
from tether.tools._pipeline import TOOLS_SERVICE
from tether.tools._seams import POST_EXECUTE, PRE_EXECUTE, TOOL_GUARD

__all__ = [
    "JOBS_SERVICE",
    "POST_EXECUTE",
    "PRE_EXECUTE",
    "TOOLS_SERVICE",
    "TOOL_GUARD",
    "USER_QUESTION",
    "AbortSignal",
    "AbortedError",
    "PostDecision",
    "PreDecision",
    "QuestionRequest",
    "Tool",
    "ToolArgs",
    "ToolCall",
    "ToolResult",
]
