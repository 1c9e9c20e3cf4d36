"""The model layer: one protocol, an OpenAI-compatible client, and the scripted model.

This package sits below the agent layer and imports nothing from agent, tools or session.
"""

from tether.model._help import MODEL_SPEC_HELP
from tether.model._openai_wire import Thinking, ToolCallContent, WireOptions
from tether.model.client import ModelClient, complete
from tether.model.openai_compat import (
    DEEPSEEK,
    OPENAI,
    PRESETS,
    OpenAICompatClient,
    ProviderPreset,
    retry_after_seconds,
)
from tether.model.scripted import (
    NO_MORE_STEPS,
    Script,
    ScriptedModel,
    ScriptEntry,
    ScriptMatch,
    ScriptStep,
    ScriptToolCall,
)
from tether.model.settings import (
    ConfiguredModel,
    ModelConfig,
    ModelProfile,
    load_model_config,
    resolve_model,
    user_config_path,
)
from tether.model.spec import ModelSpec, SpecKind, parse_model_spec
from tether.model.types import (
    FINISH_REASON_MEANINGS,
    MODEL_ERROR_CODES,
    ROLE_MEANINGS,
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
    "DEEPSEEK",
    "FINISH_REASON_MEANINGS",
    "MODEL_ERROR_CODES",
    "MODEL_SPEC_HELP",
    "NO_MORE_STEPS",
    "OPENAI",
    "PRESETS",
    "ROLE_MEANINGS",
    "Completion",
    "ConfiguredModel",
    "FinishReason",
    "Message",
    "ModelClient",
    "ModelConfig",
    "ModelError",
    "ModelErrorCode",
    "ModelProfile",
    "ModelRequest",
    "ModelSpec",
    "OpenAICompatClient",
    "ProviderPreset",
    "ReasoningDelta",
    "Role",
    "Script",
    "ScriptEntry",
    "ScriptMatch",
    "ScriptStep",
    "ScriptToolCall",
    "ScriptedModel",
    "SpecKind",
    "StreamDelta",
    "StreamEvent",
    "TextDelta",
    "Thinking",
    "ToolCall",
    "ToolCallContent",
    "ToolCallDelta",
    "ToolSchema",
    "Usage",
    "WireOptions",
    "complete",
    "load_model_config",
    "parse_model_spec",
    "resolve_model",
    "retry_after_seconds",
    "user_config_path",
]
