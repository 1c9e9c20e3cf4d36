"""The wire-neutral vocabulary of the model layer.

Everything above this layer (agent, tools, session) talks to models in these types only; the
OpenAI-compatible client and the scripted model translate to and from them. All types are
frozen dataclasses so that a request or a completion can be shared between tasks safely.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, TypeAlias

from tether.errors import TetherError
from tether.model._valid_text import valid_arguments, valid_text
from tether.session import JsonValue

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
"""Who wrote a message (see :data:`ROLE_MEANINGS`)."""

ROLE_MEANINGS: Final[Mapping[Role, str]] = {
    "system": "instructions from the harness (system prompt)",
    "user": "input from the user, or context the harness injects on the user's side",
    "assistant": "a model reply: text, optional reasoning, optional tool calls",
    "tool": "the result of one tool call, linked to it by tool_call_id",
}

FinishReason: TypeAlias = Literal["stop", "tool_calls", "length", "error"]
"""Why a completion ended (see :data:`FINISH_REASON_MEANINGS`)."""

FINISH_REASON_MEANINGS: Final[Mapping[FinishReason, str]] = {
    "stop": "the model finished its reply and wants the turn to end",
    "tool_calls": "the model asked for tool calls and expects their results",
    "length": "the reply was cut off by the output token limit",
    "error": "the provider stopped the reply for another reason (content filter, "
    "insufficient resources, an unknown finish_reason)",
}

ModelErrorCode: TypeAlias = Literal[
    "MODEL_AUTH",
    "MODEL_NOT_FOUND",
    "MODEL_BAD_REQUEST",
    "MODEL_BAD_RESPONSE",
    "MODEL_RATE_LIMITED",
    "MODEL_UNAVAILABLE",
    "MODEL_TIMEOUT",
    "MODEL_SCRIPT",
    "MODEL_CONFIG",
]
"""Stable codes carried by :class:`ModelError` (see :data:`MODEL_ERROR_CODES`)."""

MODEL_ERROR_CODES: Final[Mapping[ModelErrorCode, str]] = {
    "MODEL_AUTH": "the provider refused the API key (HTTP 401/403)",
    "MODEL_NOT_FOUND": "the model name or the base URL does not exist (HTTP 404)",
    "MODEL_BAD_REQUEST": "the provider rejected the request itself (other HTTP 4xx, "
    "e.g. context too long, insufficient balance)",
    "MODEL_BAD_RESPONSE": "the response was invalid, malformed or truncated",
    "MODEL_RATE_LIMITED": "HTTP 429 persisted after every retry",
    "MODEL_UNAVAILABLE": "HTTP 5xx, connection failures or connect timeouts persisted after "
    "every retry",
    "MODEL_TIMEOUT": "the server accepted the request but sent nothing within the read timeout "
    "(not retried)",
    "MODEL_SCRIPT": "the scripted model failed: bad script file, no matching entry, or an "
    "unmet expect",
    "MODEL_CONFIG": "the model spec is missing or invalid, or its API key is not set",
}


class ModelError(TetherError):
    """A model call failed. ``code`` is one of :data:`ModelErrorCode`.

    ``status`` is the HTTP status when the failure came from a provider's HTTP answer.
    """

    code: str = "MODEL_ERROR"

    def __init__(self, message: str, *, code: ModelErrorCode, status: int | None = None) -> None:
        super().__init__(message, code=code)
        self.status = status


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call requested by the model. ``arguments`` is the raw JSON text it produced."""

    id: str
    name: str
    arguments: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", valid_text(self.id))
        object.__setattr__(self, "name", valid_text(self.name))
        object.__setattr__(self, "arguments", valid_arguments(self.arguments))


@dataclass(frozen=True, slots=True)
class ToolSchema:
    """A tool offered to the model. ``parameters`` is a JSON-schema object."""

    name: str
    description: str
    parameters: Mapping[str, JsonValue] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message.

    ``reasoning`` is an assistant's reasoning text (DeepSeek's ``reasoning_content``), ``""``
    when the server sent an empty one and ``None`` when it sent none; it is sent back where
    DeepSeek's thinking mode needs it (``docs/models.md``). ``tool_calls`` only appear on
    assistant messages; ``tool_call_id`` is required on tool messages.
    """

    role: Role
    content: str = ""
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        if self.role not in ROLE_MEANINGS:
            raise ValueError(f"unknown message role {self.role!r}")
        if self.tool_calls and self.role != "assistant":
            raise ValueError(f"only assistant messages carry tool_calls, not {self.role!r}")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs the tool_call_id it answers")
        if not isinstance(self.tool_calls, tuple):
            # Callers pass lists; freezing keeps the message immutable and hashable.
            object.__setattr__(self, "tool_calls", tuple(self.tool_calls))

    @classmethod
    def system(cls, content: str) -> Message:
        return cls(role="system", content=content)

    @classmethod
    def user(cls, content: str, *, name: str | None = None) -> Message:
        return cls(role="user", content=content, name=name)

    @classmethod
    def assistant(
        cls,
        content: str = "",
        *,
        tool_calls: Sequence[ToolCall] = (),
        reasoning: str | None = None,
    ) -> Message:
        return cls(
            role="assistant", content=content, tool_calls=tuple(tool_calls), reasoning=reasoning
        )

    @classmethod
    def tool(cls, tool_call_id: str, content: str) -> Message:
        return cls(role="tool", content=content, tool_call_id=tool_call_id)


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts as the provider reported them (zeros when it reported none)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the reply text, in order."""

    text: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", valid_text(self.text))


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of the reasoning text (DeepSeek reasoner), in order."""

    text: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", valid_text(self.text))


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A piece of tool call number ``index``.

    ``id`` and ``name`` usually arrive once, on the first delta of a call;
    ``arguments_delta`` pieces concatenate to the call's JSON arguments.
    """

    index: int
    id: str | None
    name: str | None
    arguments_delta: str

    def __post_init__(self) -> None:
        if self.id is not None:
            object.__setattr__(self, "id", valid_text(self.id))
        if self.name is not None:
            object.__setattr__(self, "name", valid_text(self.name))
        object.__setattr__(self, "arguments_delta", valid_text(self.arguments_delta))


@dataclass(frozen=True, slots=True)
class Completion:
    """The assembled reply: always the last item of a model stream."""

    text: str
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: FinishReason = "stop"

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", valid_text(self.text))
        if self.reasoning is not None:
            object.__setattr__(self, "reasoning", valid_text(self.reasoning))

    def to_message(self) -> Message:
        """The assistant message this completion adds to the history."""
        return Message.assistant(self.text, tool_calls=self.tool_calls, reasoning=self.reasoning)


StreamDelta: TypeAlias = TextDelta | ReasoningDelta | ToolCallDelta
"""The incremental items of a model stream."""

StreamEvent: TypeAlias = TextDelta | ReasoningDelta | ToolCallDelta | Completion
"""Everything a model stream yields: deltas, then exactly one final :class:`Completion`."""


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One model call.

    ``session_id``, ``depth`` and ``label`` identify the asking session; ``step_index`` is the
    number of model replies the session already has. Real clients ignore all four; the
    scripted model matches on them (see :mod:`tether.model._scripted`).
    """

    messages: Sequence[Message]
    tools: Sequence[ToolSchema] = ()
    session_id: str = ""
    depth: int = 0
    label: str | None = None
    step_index: int | None = None
