"""Shared child composition: the only home of the rules that fix a child's scope.

Every in-process path (one-shot spawn and fork, continuable start and cold resume, the workflow
API, plugins) composes children through these functions (ARCHITECTURE.md principle 6):

- :func:`delegation_depth_of` / :func:`resolve_child_depth`: the depth cap;
- :func:`child_session_meta`: the child's durable header (lineage, ``origin``, depth);
- :func:`capture_delegated_policy_overrides`: the parent's *explicit* sandbox override and the
  ``never`` pin, read **synchronously, before the first await** of a start;
- :func:`append_delegated_policy_overrides`: written into the child's log during unpublished
  setup, after any fork seed and its end-seed marker;
- :func:`apply_child_composition`: the ``subagent:delegation`` runtime context (order 120),
  the persona section, and the tool filter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, TypeAlias

from tether.agent import Agent, AgentOptions
from tether.errors import TetherError
from tether.kernel import Context
from tether.policy import PolicySource, SandboxMode
from tether.session import Event, Session, SessionMeta

DELEGATION_CONTEXT_NAME: Final = "subagent:delegation"
DELEGATION_CONTEXT_ORDER: Final = 120
PERSONA_SECTION_NAME: Final = "deployment:persona"
DEFAULT_MAX_DEPTH: Final = 3
DELEGATION_SOURCE: Final[PolicySource] = "delegation"

DELEGATION_TEXT: Final = (
    "You are a delegated subagent. Your permission scope was fixed when you started and cannot "
    "be widened from inside: operations that would need approval are rejected automatically. "
    "If the task needs wider access than your scope allows, do not retry the denied "
    "operation; finish and state the limitation in your reply to the delegating agent."
)


SubagentErrorCode: TypeAlias = Literal[
    "CANCELLED",
    "CONTINUATION_UNAVAILABLE",
    "DRAINING",
    "DUPLICATE_CHILD",
    "NO_AGENT",
    "NOT_RESUMABLE",
    "PARENT_UNAVAILABLE",
    "PERSISTENCE_UNAVAILABLE",
    "UNAUTHORIZED",
]
"""The codes a :class:`SubagentError` may be raised with besides its own."""


class SubagentError(TetherError):
    """Delegation failed; ``code`` says why (``docs/errors.md``)."""

    code = "SUBAGENT_ERROR"

    def __init__(self, message: str, *, code: SubagentErrorCode | None = None) -> None:
        super().__init__(message, code=code)


class SubagentDepthError(SubagentError):
    code = "SUBAGENT_DEPTH"


class UnknownToolError(SubagentError):
    code = "UNKNOWN_TOOL"


@dataclass(frozen=True, slots=True)
class DelegatedPolicy:
    """What a child inherits: the parent's explicit sandbox override (or ``None``) and the
    approval pin (``never`` whenever an approval service is composed, else ``None``)."""

    sandbox_mode: SandboxMode | None
    approval_policy: str | None


@dataclass(frozen=True, slots=True)
class ToolFilter:
    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()

    def to_json(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        if self.allow is not None:
            out["allow"] = list(self.allow)
        if self.deny:
            out["deny"] = list(self.deny)
        return out

    @classmethod
    def from_json(cls, raw: object) -> ToolFilter | None:
        if not isinstance(raw, Mapping):
            return None
        allow = raw.get("allow")
        deny = raw.get("deny", ())
        return cls(
            tuple(str(x) for x in allow) if isinstance(allow, Sequence) else None,
            tuple(str(x) for x in deny) if isinstance(deny, Sequence) else (),
        )


def delegation_depth_of(agent: Agent) -> int:
    """The agent's delegation depth; the persisted header is the floor, so a resumed child
    can never reset to 0."""
    return max(agent.session.header.delegation_depth, 0)


def check_max_depth(max_depth: int) -> int:
    if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 0:
        raise SubagentError(f"maxDepth must be a non-negative integer, got {max_depth!r}")
    return max_depth


def resolve_child_depth(parent: Agent, max_depth: int) -> int:
    """Depth of a new child of ``parent``: parent + 1, refused above ``max_depth``."""
    depth = delegation_depth_of(parent) + 1
    if depth > check_max_depth(max_depth):
        raise SubagentDepthError(f"subagent depth {depth} exceeds maxDepth {max_depth}")
    return depth


def resolve_child_agent_options(
    parent: Agent,
    *,
    label: str | None,
    overrides: AgentOptions | None = None,
    allowed_tools: frozenset[str] | None = None,
) -> AgentOptions:
    """The child inherits the parent's model and limits unless overridden."""
    base = overrides or parent.options
    return replace(base, label=label, allowed_tools=allowed_tools)


def child_session_meta(parent: Agent, depth: int, seed_length: int = 0) -> SessionMeta:
    header = parent.session.header
    return SessionMeta(
        cwd=header.cwd,
        parent_session=parent.id,
        seed_length=seed_length if seed_length > 0 else None,
        origin="subagent",
        delegation_depth=depth,
        agent_preset=header.agent_preset,
    )


def capture_delegated_policy_overrides(ctx: Context, parent: Agent) -> DelegatedPolicy:
    """Read the parent's scope **now**. Call it synchronously before the first await: a switch
    the parent makes after this belongs to the parent's future, not the child's.

    Only the parent's *explicit* override is captured, never the deployment default and never a
    one-shot escalation grant (grants live on the call, not in the log). The approval policy
    is pinned to ``never`` whenever an approval service is composed; the parent's own approval
    policy is deliberately not read.
    """
    sandbox = ctx.get("sandbox_policy")
    mode = sandbox.override_of(parent.session) if sandbox is not None else None
    approval = "never" if ctx.get("approval") is not None else None
    return DelegatedPolicy(mode, approval)


def append_delegated_policy_overrides(
    session: Session, overrides: DelegatedPolicy, *, source: PolicySource = DELEGATION_SOURCE
) -> list[Event]:
    """Write the captured scope into the child's log: ``sandbox/mode`` then ``approval/policy``.

    Called during unpublished setup, after any seed and its end-seed marker, so a fresh
    snapshot beats stale seed state (last event wins).
    """
    appended: list[Event] = []
    if overrides.sandbox_mode is not None:
        appended.append(
            session.append(
                "sandbox/mode",
                {"mode": SandboxMode(overrides.sandbox_mode).value, "source": source},
            )
        )
    if overrides.approval_policy is not None:
        appended.append(
            session.append(
                "approval/policy", {"policy": overrides.approval_policy, "source": source}
            )
        )
    return appended


def narrow_delegated_policy(
    captured: DelegatedPolicy, cap: SandboxMode | None, default: SandboxMode
) -> DelegatedPolicy:
    """Apply a per-delegation sandbox cap: the child gets the narrower of the parent's
    effective mode and the cap. A cap can only narrow."""
    if cap is None:
        return captured
    effective = captured.sandbox_mode or default
    order = [SandboxMode.READ_ONLY, SandboxMode.WORKSPACE_WRITE, SandboxMode.DANGER_FULL_ACCESS]
    narrower = min(SandboxMode(effective), SandboxMode(cap), key=order.index)
    return replace(captured, sandbox_mode=narrower)


def resolve_tool_filter(
    available: Sequence[str], tool_filter: ToolFilter | None
) -> frozenset[str] | None:
    """The allowed tool names; unknown names in the filter fail loudly."""
    if tool_filter is None:
        return None
    known = set(available)
    unknown = sorted({*(tool_filter.allow or ()), *tool_filter.deny} - known)
    if unknown:
        raise UnknownToolError(f"tool filter names unknown tools: {', '.join(unknown)}")
    allowed = set(tool_filter.allow) if tool_filter.allow is not None else known
    return frozenset(allowed - set(tool_filter.deny))


def delegation_context_text(_agent: Any) -> str:
    return DELEGATION_TEXT


def apply_child_composition(
    child_ctx: Context, child: Agent, *, persona: str | None = None
) -> None:
    """Register the child's delegation statement (and persona) scoped to the child agent.

    The statement is a runtime context, not a system-prompt section, so the child's system
    prompt stays identical to an unpinned agent's (behaviour.md §7, uniformity). Registrations
    die with ``child_ctx``. The tool filter is applied through the child's options
    (:func:`resolve_tool_filter`), which removes tools from the prompt and from execution
    together.
    """
    child_ctx.context(
        DELEGATION_CONTEXT_NAME, DELEGATION_CONTEXT_ORDER, delegation_context_text, scope=child
    )
    if persona:
        child_ctx.section(PERSONA_SECTION_NAME, 0, persona, scope=child)
