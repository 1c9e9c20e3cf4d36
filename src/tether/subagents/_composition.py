"""Child composition: the only home of the rules that fix a child's scope.

Every in-process delegation (one-shot spawn and fork, continuable start, the workflow API)
describes its child with a :class:`ChildSpec` and prepares it with :func:`prepare_child`, which
does, in this order and without awaiting:

- the depth: the parent's depth plus one, refused above the spec's ``max_depth``;
- the capture of the parent's scope: its *explicit* sandbox override (never the deployment
  default, never a one-call escalation grant), narrowed by the spec's ``sandbox_cap``, and the
  approval pin ``never`` whenever an approval service is composed;
- the seed (a fork's prefix; a continuable child's descriptor) and the prepared, unpublished
  session with its durable header (lineage, ``origin``, depth);
- the delegation events, ``sandbox/mode`` then ``approval/policy``, each with
  ``source: "delegation"``, written through the policy services' own write paths after the
  seed and its end-seed marker, so a fresh snapshot beats stale seed state (last event wins);
  then, when the parent is bound by any, its ``deny`` and ``ask`` permission rules as
  ``permission/rules {rules, source: "delegation"}`` (never its ``allow`` rules or grants);
- the parent's project instructions, as its log recorded them, for a child in the parent's
  working directory (:meth:`ProjectInstructions.inherit`), so no child re-reads the files.

Because it is synchronous, a parent's switch can never slip in between the start of a
delegation and the capture of its scope: callers only publish and run what it returns.
:func:`compose_child_agent` then builds the child agent over a prepared (or, on cold resume,
reopened) session: its options, its tool filter, the ``subagent:delegation`` runtime context
and the persona.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final, Literal, TypeAlias

from tether.agent import PROJECT_INSTRUCTIONS, Agent
from tether.agent._agent import AgentOptions
from tether.agent._events import TurnClosed
from tether.errors import TetherError
from tether.kernel import SESSIONS_SERVICE, Context
from tether.policy import (
    APPROVAL_SERVICE,
    SANDBOX_POLICY_SERVICE,
    ApprovalPolicy,
    ApprovalService,
    PolicySource,
    SandboxMode,
    SandboxPolicyService,
    is_strictly_wider,
)
from tether.policy._permissions import PERMISSION_RULES, capture_for_child
from tether.session import Event, Session, SessionHeader, SessionMeta, SessionStore
from tether.subagents._events import Descriptor, DescriptorMode, ToolFilter

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

Provider = Literal["spawn", "fork"]
"""``spawn``: a fresh child. ``fork``: seeded with the parent's log up to its last
``turn/end`` (the in-flight turn that delegates is not inherited)."""


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


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildSpec:
    """What a delegation asks for. Everything else about the child (its scope, depth and
    header) comes from its parent, in :func:`prepare_child`."""

    provider: Provider = "spawn"
    label: str | None = None
    max_depth: int | None = DEFAULT_MAX_DEPTH
    """``None``: no cap (the workflow API's default)."""
    persona: str | None = None
    tool_filter: ToolFilter | None = None
    sandbox_cap: SandboxMode | None = None
    """Narrow the child below the parent's mode (never wider)."""
    options: AgentOptions | None = None
    """The child's model and limits; the parent's by default."""


@dataclass(frozen=True, slots=True)
class PreparedChild:
    """A child whose session is built and holds its delegation events, but nothing about it is
    live yet: publishing it (enter, announce) is the caller's next step."""

    store: SessionStore
    session: Session
    descriptor: Descriptor


def delegation_depth_of(agent: Agent) -> int:
    """The agent's delegation depth; the persisted header is the floor, so a resumed child
    can never reset to 0."""
    return max(agent.session.header.delegation_depth, 0)


def check_max_depth(max_depth: int) -> int:
    if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 0:
        raise SubagentError(f"maxDepth must be a non-negative integer, got {max_depth!r}")
    return max_depth


def resolve_child_depth(parent: Agent, max_depth: int | None) -> int:
    """Depth of a new child of ``parent``: parent + 1, refused above ``max_depth`` (``None``:
    no cap)."""
    depth = delegation_depth_of(parent) + 1
    if max_depth is not None and depth > check_max_depth(max_depth):
        raise SubagentDepthError(f"subagent depth {depth} exceeds maxDepth {max_depth}")
    return depth


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


def fork_seed(parent: Session) -> list[Event]:
    """The parent's log up to and including its last ``turn/end`` (empty if none)."""
    last_end = parent.last(TurnClosed.TYPE)
    return [] if last_end is None else list(parent.events[: last_end.seq + 1])


def require_store(agent: Agent) -> SessionStore:
    store = agent.ctx.get(SESSIONS_SERVICE)
    if store is None:
        raise SubagentError("no session store is composed", code="PERSISTENCE_UNAVAILABLE")
    return store


def delegated_mode(
    sandbox: SandboxPolicyService | None, parent: Session, cap: SandboxMode | None
) -> SandboxMode | None:
    """The sandbox mode a child of ``parent`` is pinned to, or ``None`` for no event (the
    deployment default then applies to the child as it does to the parent).

    Without a cap that is the parent's explicit override. With one, it is the narrower of the
    parent's effective mode and the cap: a cap can only narrow. Without a sandbox policy
    service the deployment default is unknown, so only read-only is sure to be no wider.
    """
    if cap is None:
        return None if sandbox is None else sandbox.override_of(parent)
    effective = SandboxMode.READ_ONLY if sandbox is None else sandbox.resolve(parent).mode
    return effective if is_strictly_wider(cap, effective) else cap


def prepare_child(
    parent: Agent, spec: ChildSpec, *, mode: DescriptorMode, child_id: str | None = None
) -> PreparedChild:
    """Depth, capture, seed, the prepared session and its delegation events, in one synchronous
    stretch (see the module docstring). Raises :class:`SubagentDepthError` above the cap and
    :class:`SubagentError` without a session store; nothing is published either way."""
    depth = resolve_child_depth(parent, spec.max_depth)
    sandbox: SandboxPolicyService | None = parent.ctx.get(SANDBOX_POLICY_SERVICE)
    approval: ApprovalService | None = parent.ctx.get(APPROVAL_SERVICE)
    pinned_mode = delegated_mode(sandbox, parent.session, spec.sandbox_cap)
    descriptor = Descriptor(mode, spec.provider, spec.label, spec.persona, spec.tool_filter)
    prefix = fork_seed(parent.session) if spec.provider == "fork" else []
    store = require_store(parent)
    new_id = child_id or str(uuid.uuid4())
    session = store.prepare(
        new_id,
        seed=_seed(new_id, prefix, descriptor),
        meta=child_session_meta(parent, depth, len(prefix)),
    )
    if pinned_mode is not None:
        # A capped child of a deployment without a sandbox policy service is still recorded.
        set_mode = (
            sandbox.set_sandbox_mode
            if sandbox is not None
            else SandboxPolicyService.set_sandbox_mode
        )
        set_mode(session, pinned_mode, DELEGATION_SOURCE)
    if approval is not None:
        approval.set_approval_policy(session, ApprovalPolicy.NEVER, DELEGATION_SOURCE)
    # Every deny and ask rule that binds the parent now binds the child for good (cold resume
    # included); its allow rules and grants never reach it (docs/decisions/0056).
    captured = capture_for_child(parent.ctx.get(PERMISSION_RULES), parent.session)
    if captured is not None:
        session.append(captured.TYPE, captured.to_data())
    instructions = parent.ctx.get(PROJECT_INSTRUCTIONS)
    if instructions is not None:
        instructions.inherit(parent.session, session)
    return PreparedChild(store, session, descriptor)


def _seed(child_id: str, prefix: list[Event], descriptor: Descriptor) -> list[Event]:
    """A one-shot child's seed is the prefix alone (its descriptor is written when its first
    step enters). A continuable child's descriptor is part of its seed, after the prefix and
    the prefix's end-seed marker, so a cold resume finds it before any turn."""
    if descriptor.mode == "one-shot":
        return prefix
    staging = Session(SessionHeader(id=child_id, created_at=0), prefix)
    staging.append(descriptor.TYPE, descriptor.to_data())
    return list(staging.events)


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


def compose_child_agent(
    ctx: Context,
    parent: Agent,
    session: Session,
    descriptor: Descriptor,
    *,
    options: AgentOptions | None = None,
) -> Agent:
    """The child agent over ``session``, its composition scoped to a context of its own
    (``agent.scope_ctx``, disposed with the child).

    It gets the parent's model and limits unless ``options`` override them, the descriptor's
    label, and the descriptor's tool filter through its options, which removes tools from the
    prompt and from execution together (a filter naming a tool the parent does not have raises
    :class:`UnknownToolError` before anything is registered). The delegation statement is a
    runtime context, not a system-prompt section, so the child's system prompt stays identical
    to an unpinned agent's; the persona is a section.
    """
    allowed = resolve_tool_filter(
        parent.tools.names() if parent.tools else [], descriptor.tool_filter
    )
    child_options = replace(
        options or parent.options, label=descriptor.label, allowed_tools=allowed
    )
    child_ctx = ctx.child(f"subagent:{session.id}")
    agent = Agent(ctx, session, child_options, tools=parent.tools)
    agent.scope_ctx = child_ctx
    child_ctx.context(
        DELEGATION_CONTEXT_NAME, DELEGATION_CONTEXT_ORDER, delegation_context_text, scope=agent
    )
    if descriptor.persona:
        child_ctx.section(PERSONA_SECTION_NAME, 0, descriptor.persona, scope=agent)
    return agent


def delegation_context_text(_agent: object) -> str:
    return DELEGATION_TEXT
