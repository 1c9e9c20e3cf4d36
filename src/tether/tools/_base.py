"""What a tool is, and what one call of it carries.

A tool declares its arguments as a pydantic model; the JSON schema the model sees is derived
from it, and the same model validates every call, so a malformed argument becomes an error
result the model can read rather than an exception. A call carries its effective sandbox
policy, resolved once before dispatch (docs/design.md, principle 4): tool bodies never read
session state to decide what they may do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, TypeAlias

from pydantic import BaseModel, ConfigDict

from tether._signals import AbortSignal
from tether.session import HasSession, JsonValue

if TYPE_CHECKING:
    from tether.kernel import Context
    from tether.policy import SandboxExecutionPolicy


class ToolArgs(BaseModel):
    """Base for argument models: unknown fields are an error, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True, slots=True)
class ToolResult:
    content: str
    is_error: bool = False
    details: Mapping[str, JsonValue] = field(default_factory=dict)
    """Structured facts for surfaces and tests (exit code, denial marker...); not shown to the model."""

    @classmethod
    def error(cls, reason: str, **details: JsonValue) -> ToolResult:
        """The denial/error form every path uses: ``Error: <reason>`` with the error flag."""
        return cls(f"Error: {reason}", True, details)


AgentLike: TypeAlias = HasSession
"""What the tool layer needs of an agent: its session (and its identity as a scope)."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One execution: parsed, frozen arguments plus everything the body may use."""

    call_id: str
    name: str
    args: ToolArgs
    raw_arguments: str
    agent: AgentLike | None
    signal: AbortSignal
    ctx: Context
    policy: SandboxExecutionPolicy | None
    """The call's effective sandbox policy (``None``: no sandbox policy service composed)."""

    def arguments(self) -> dict[str, JsonValue]:
        """The arguments as JSON (what answerers, hooks and headlines are shown)."""
        return self.args.model_dump(mode="json", exclude_none=True)


class Tool(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def Args(self) -> type[ToolArgs]: ...

    async def run(self, call: ToolCall) -> ToolResult: ...


PreDecisionKind = Literal["allow", "deny", "ask"]


@dataclass(frozen=True, slots=True)
class PreDecision:
    """A ``tools/pre-execute`` decision. ``reason`` is required for deny, optional for ask."""

    kind: PreDecisionKind
    reason: str | None = None

    @classmethod
    def allow(cls) -> PreDecision:
        return cls("allow")

    @classmethod
    def deny(cls, reason: str) -> PreDecision:
        return cls("deny", reason)

    @classmethod
    def ask(cls, reason: str | None = None) -> PreDecision:
        return cls("ask", reason)


PostDecisionKind = Literal["accept", "block"]


@dataclass(frozen=True, slots=True)
class PostDecision:
    """A ``tools/post-execute`` decision: keep (optionally replace) the result, or block it."""

    kind: PostDecisionKind
    result: ToolResult | None = None
    feedback: str | None = None
