"""The model layer: one protocol, an OpenAI-compatible client, and the scripted model.

This package sits below the agent layer and imports nothing from agent, tools or session.
"""

from tether.model._client import ModelClient
from tether.model._context_window import KNOWN_CONTEXT_WINDOWS
from tether.model._openai_compat import OpenAICompatClient
from tether.model._scripted import ScriptedModel
from tether.model._spec import ModelSpec, parse_model_spec
from tether.model._types import (
    Completion,
    FinishReason,
    Message,
    ModelError,
    ModelErrorCode,
    ModelRequest,
    ReasoningDelta,
    Role,
    StreamDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolSchema,
    Usage,
)

__all__ = [
    "KNOWN_CONTEXT_WINDOWS",
    "Completion",
    "FinishReason",
    "Message",
    "ModelClient",
    "ModelError",
    "ModelErrorCode",
    "ModelRequest",
    "ModelSpec",
    "OpenAICompatClient",
    "ReasoningDelta",
    "Role",
    "ScriptedModel",
    "StreamDelta",
    "StreamEvent",
    "TextDelta",
    "ToolCall",
    "ToolCallDelta",
    "ToolSchema",
    "Usage",
    "parse_model_spec",
]
