"""The continuation manager: background children that their parent can talk to again.

A continuable child is one durable session plus at most one process-local *activation* (the
resident agent). The manager starts children (capturing the parent's scope before the first
await), routes ``followup`` messages (enqueue, wake, or cold resume), tells the parent when a
child settles, relays ``report``, handles ``interrupt`` with its authority rules, and drains
children first on shutdown.

Its background work (a watcher per resident child that waits for it to settle, and the
disposal that follows) runs in the runtime's task scope (:meth:`Context.spawn`), so closing the
kernel cancels and awaits whatever is still running.

Cold resume replays the child's own log: nothing policy-related is appended and nothing is
re-captured from the parent, so a parent that widened later cannot widen the child.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Final, Literal

from tether._signals import AbortSignal
from tether.agent import AGENTS_SERVICE, Agent
from tether.agent._agent import AgentOptions
from tether.kernel import SESSIONS_SERVICE, Context, ServiceKey
from tether.policy import APPROVAL_SERVICE, SandboxMode
from tether.session import JsonValue, SessionHeader, SessionNotFoundError, StoredSession
from tether.subagents._composition import (
    DEFAULT_MAX_DEPTH,
    ChildSpec,
    Provider,
    SubagentError,
    compose_child_agent,
    prepare_child,
    require_store,
)
from tether.subagents._descriptor import fold_descriptor
from tether.subagents._events import Descriptor, ToolFilter
from tether.subagents._lifecycle import SubagentLifecycle
from tether.subagents._narrowing import narrow_live, narrow_stored
from tether.subagents._results import SubagentResult, result_from_events
from tether.subagents._seams import SUBAGENT_END, SUBAGENT_START
from tether.subagents._visibility import PendingQuestion, blocked_labels, last_denial

log = logging.getLogger(__name__)

SUBAGENTS_SERVICE: Final[ServiceKey[ContinuationManager]] = ServiceKey("subagents")
"""The continuable children of a composition (provided by the subagents plugin)."""
ReportDelivery = Literal["next-step", "quiet"]
"""``next-step``: steer the parent (folded into its next step). ``quiet``: inject without
waking it."""

SETTLED_SUMMARY: Final[Mapping[str, str]] = {
    "completed": "finished and will do no further work unless you send it more.",
    "aborted": "was stopped and will do no further work unless you send it more.",
    "max-tokens": "ran out of room before finishing.",
    "max-steps": "reached its step limit before finishing.",
    "refusal": "declined the task.",
    "error": "failed.",
}


@dataclass(frozen=True, slots=True)
class UserAuthority:
    """A human acting for the child's durable parent session."""

    parent_session_id: str


@dataclass(frozen=True, slots=True)
class AncestorAuthority:
    """A live agent in the child's ancestry."""

    agent: Agent


Authority = UserAuthority | AncestorAuthority


@dataclass(eq=False)
class Activation:
    agent: Agent
    parent_id: str
    descriptor: Descriptor
    unregister: object
    turn_start: int = 0
    watcher: asyncio.Task[None] | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass(frozen=True, slots=True)
class ChildRow:
    id: str
    label: str | None
    status: Literal["running", "idle", "ready"]
    depth: int
    parent: str | None
    blocked: str | None = None
    denied: str | None = None
    diagnostic: str | None = None
    """Why the child's log could not be read (the row is then shown, not hidden)."""


class ContinuationManager:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._active: dict[str, Activation] = {}
        self._disposing: dict[str, asyncio.Task[None]] = {}
        self._disposing_parent: dict[str, str] = {}
        self._owned: dict[str, set[str]] = {}
        """Parent id -> its children that are resident or being disposed."""
        self._settled: dict[str, asyncio.Event] = {}
        """Parent id -> set when a watcher or disposal of one of its children ends."""
        self._locks: dict[str, asyncio.Lock] = {}
        self._draining = False
        self._changed = asyncio.Event()
        """Set when any watcher or disposal ends: what :meth:`when_quiescent` waits for."""
        self.report_tool_factory: object = None

    # -- queries ------------------------------------------------------------------------------
    def activation(self, child_id: str) -> Activation | None:
        return self._active.get(child_id)

    def resident(self) -> list[Agent]:
        return [a.agent for a in self._active.values()]

    async def when_quiescent(self) -> None:
        """Wait until no continuable child is resident and none is being disposed.

        Woken once per watcher or disposal that ends, never by polling every child: a
        thousand children settle in a thousand wake-ups."""
        while self._active or self._disposing:
            self._changed.clear()
            await self._changed.wait()

    def _ended(self, parent_id: str, child_id: str) -> None:
        """A watcher or a disposal of ``child_id`` ended: wake who waits for it."""
        self._changed.set()
        if child_id not in self._active and child_id not in self._disposing:
            owned = self._owned.get(parent_id)
            if owned is not None:
                owned.discard(child_id)
                if not owned:
                    del self._owned[parent_id]
        settled = self._settled.get(parent_id)
        if settled is not None:
            settled.set()

    # -- start --------------------------------------------------------------------------------
    async def start(
        self,
        parent: Agent,
        prompt: str,
        *,
        provider: Provider = "spawn",
        label: str | None = None,
        child_id: str | None = None,
        max_depth: int = DEFAULT_MAX_DEPTH,
        persona: str | None = None,
        tool_filter: ToolFilter | None = None,
        sandbox_cap: SandboxMode | None = None,
        options: AgentOptions | None = None,
        signal: AbortSignal | None = None,
    ) -> str:
        """Create and start a background child; returns its id once the prompt is accepted
        (see :meth:`start_child`)."""
        spec = ChildSpec(
            provider=provider,
            label=label,
            max_depth=max_depth,
            persona=persona,
            tool_filter=tool_filter,
            sandbox_cap=sandbox_cap,
            options=options,
        )
        return await self.start_child(parent, prompt, spec, child_id=child_id, signal=signal)

    async def start_child(
        self,
        parent: Agent,
        prompt: str,
        spec: ChildSpec,
        *,
        child_id: str | None = None,
        signal: AbortSignal | None = None,
    ) -> str:
        """Create and start a background child of ``parent``; returns its id once the prompt
        is accepted. The child is prepared before the only await (the check that a
        caller-supplied id is not stored yet), so the parent's scope is the one it had when
        the start began."""
        if self._draining:
            raise SubagentError("subagents are draining; no new children", code="DRAINING")
        store = require_store(parent)
        if store.persistence is None:
            raise SubagentError(
                "continuable subagents need a persistent session store",
                code="PERSISTENCE_UNAVAILABLE",
            )
        new_id = child_id or str(uuid.uuid4())
        prepared = prepare_child(parent, spec, mode="continuable", child_id=new_id)
        if new_id in self._active or store.get(new_id) is not None:
            raise SubagentError(f"subagent {new_id!r} already exists", code="DUPLICATE_CHILD")
        # Re-check the live reservation after the await: a concurrent start with the same id
        # may have materialized it meanwhile.
        if child_id is not None and (
            await store.exists(new_id) or new_id in self._active or store.get(new_id) is not None
        ):
            raise SubagentError(f"subagent {new_id!r} already exists", code="DUPLICATE_CHILD")
        if signal is not None and signal.aborted:
            raise SubagentError("subagent start was aborted before publication", code="CANCELLED")
        if self._draining:
            raise SubagentError("subagents are draining; no new children", code="DRAINING")
        agent = compose_child_agent(
            parent.ctx, parent, prepared.session, prepared.descriptor, options=spec.options
        )
        self._materialize(agent, parent.id, prepared.descriptor, create=True)
        agent.followup(prompt)
        return new_id

    # -- followup / cold resume -------------------------------------------------------------
    async def followup(
        self,
        parent: Agent,
        child_id: str,
        content: str,
        *,
        source: Mapping[str, JsonValue] | None = None,
    ) -> None:
        """Deliver ``content`` to a child of ``parent``: enqueue, wake, or cold-resume it."""
        lock = self._locks.setdefault(child_id, asyncio.Lock())
        async with lock:
            active = self._active.get(child_id)
            if active is not None:
                self._authorize_parent(parent, active.parent_id, child_id)
                active.agent.followup(content, source=source)
                self._watch(active)
                return
            disposing = self._disposing.get(child_id)
            if disposing is not None:
                await asyncio.shield(disposing)
            agent = await self._cold_resume(parent, child_id)
            agent.followup(content, source=source)

    async def _cold_resume(self, parent: Agent, child_id: str) -> Agent:
        store = require_store(parent)
        try:
            stored = await store.inspect(child_id)
        except SessionNotFoundError as err:
            raise SubagentError(
                f'subagent "{child_id}" is unavailable', code="NOT_RESUMABLE"
            ) from err
        except Exception as err:
            raise SubagentError(
                f'subagent "{child_id}" is unavailable: {err}', code="NOT_RESUMABLE"
            ) from err
        self._authorize_parent(parent, stored.header.parent_session, child_id)
        descriptor = fold_descriptor(stored.events, stored.header.seed_length or 0)
        if descriptor is None or descriptor.mode != "continuable":
            raise SubagentError(
                f"subagent {child_id} is not continuable; do not retry send_message with this id",
                code="NOT_RESUMABLE",
            )
        session = await store.open(child_id, inspected=stored)  # the stored log is the state
        agent = compose_child_agent(self.ctx, parent, session, descriptor)
        self._materialize(agent, parent.id, descriptor, create=False)
        return agent

    def _authorize_parent(self, parent: Agent, durable_parent: str | None, child_id: str) -> None:
        registry = self.ctx.get(AGENTS_SERVICE)
        live = registry.get(parent.id) if registry is not None else None
        if live is not parent or durable_parent != parent.id:
            raise SubagentError(
                f"only the live direct parent of subagent {child_id} may send it messages",
                code="UNAUTHORIZED",
            )

    def _materialize(
        self, agent: Agent, parent_id: str, descriptor: Descriptor, *, create: bool
    ) -> None:
        store = require_store(agent)
        registry = self.ctx.get(AGENTS_SERVICE)
        if agent.options.allowed_tools is not None:
            agent.options = replace(
                agent.options, allowed_tools=agent.options.allowed_tools | {"report"}
            )
        if create:
            store.enter(agent.session)
            store.announce(agent.session)
        unregister = registry.register(agent) if registry is not None else None
        activation = Activation(agent, parent_id, descriptor, unregister)
        self._active[agent.id] = activation
        self._owned.setdefault(parent_id, set()).add(agent.id)
        if callable(self.report_tool_factory) and agent.tools is not None:
            assert agent.scope_ctx is not None
            agent.tools.register(self.report_tool_factory(), scope=agent, ctx=agent.scope_ctx)
        parent = registry.get(parent_id) if registry is not None else None
        if parent is not None:
            self.ctx.emit(
                SUBAGENT_START,
                SubagentLifecycle(
                    parent, agent.id, descriptor.provider, "continuable", descriptor.label
                ),
                scope=parent,
            )
        self._watch(activation)

    # -- settlement ---------------------------------------------------------------------------
    def _watch(self, activation: Activation) -> None:
        if activation.watcher is None or activation.watcher.done():
            activation.turn_start = len(activation.agent.session)
            activation.watcher = self.ctx.spawn(
                self._settle_when_idle(activation),
                name=f"subagent {activation.agent.id}: watcher",
            )
            child_id, parent_id = activation.agent.id, activation.parent_id
            activation.watcher.add_done_callback(lambda _t: self._ended(parent_id, child_id))

    async def _settle_when_idle(self, activation: Activation) -> None:
        agent = activation.agent
        settled = self._settled.setdefault(agent.id, asyncio.Event())
        try:
            while True:
                await asyncio.sleep(0)  # let work queued in the same tick land
                await agent.when_idle()
                if agent.status != "idle":
                    continue
                # Idle with queued work only happens when a cancel parked it (interrupt,
                # drain): that work stays in the inbox for the next wake, it does not keep the
                # child resident.
                settled.clear()
                if not self._has_pending_children(agent.id):
                    break
                # Waiting: quiescent but still owning children. It stays resident so their
                # settlement notices reach it (and wake it) instead of being dropped.
                await settled.wait()
        finally:
            if self._settled.get(agent.id) is settled:
                del self._settled[agent.id]
        if self._active.get(agent.id) is not activation:
            return
        del self._active[agent.id]
        task = self.ctx.spawn(self._dispose(activation), name=f"subagent {agent.id}: disposal")
        self._disposing[agent.id] = task
        self._disposing_parent[agent.id] = activation.parent_id
        task.add_done_callback(lambda _t: self._disposing.pop(agent.id, None))
        task.add_done_callback(lambda _t: self._disposing_parent.pop(agent.id, None))
        task.add_done_callback(lambda _t: self._ended(activation.parent_id, agent.id))

    def _has_pending_children(self, parent_id: str) -> bool:
        """Whether a watcher or a disposal of one of ``parent_id``'s children is still running
        (a disposal delivers the settlement notice, so the parent waits for it too). Reads
        that parent's own children, not every resident one."""
        for child_id in self._owned.get(parent_id, ()):
            active = self._active.get(child_id)
            if (
                active is not None
                and active.parent_id == parent_id
                and active.watcher is not None
                and not active.watcher.done()
            ):
                return True
            if self._disposing_parent.get(child_id) == parent_id:
                return True
        return False

    async def _dispose(self, activation: Activation) -> None:
        agent = activation.agent
        result = result_from_events(agent.id, agent.session.events[activation.turn_start :])
        self._notify_settled(activation, result)  # before ownership is released
        if agent.scope_ctx is not None:
            agent.scope_ctx.dispose()
        if callable(activation.unregister):
            activation.unregister()
        store = require_store(agent)
        try:
            await store.dispose(agent.session)
        except Exception:
            log.exception("subagent %s: final flush failed", agent.id)
        registry = self.ctx.get(AGENTS_SERVICE)
        parent = registry.get(activation.parent_id) if registry is not None else None
        if parent is not None:
            self.ctx.emit(
                SUBAGENT_END,
                SubagentLifecycle(
                    parent,
                    agent.id,
                    activation.descriptor.provider,
                    "continuable",
                    activation.descriptor.label,
                    result.stop_reason,
                    result.output,
                ),
                scope=parent,
            )

    def _notify_settled(self, activation: Activation, result: SubagentResult) -> None:
        registry = self.ctx.get(AGENTS_SERVICE)
        parent = registry.get(activation.parent_id) if registry is not None else None
        if parent is None:
            log.info("subagent %s settled; its parent is not live", activation.agent.id)
            return
        summary = f"Background subagent {activation.agent.id} {SETTLED_SUMMARY[result.stop_reason]}"
        closing = (
            f"Its closing message: {result.output}"
            if result.output
            else "It left no closing message."
        )
        source: dict[str, JsonValue] = {
            "kind": "subagent-settled",
            "form": "notice",
            "summary": summary,
            "sender_session_id": activation.agent.id,
        }
        text = f"{summary} {closing}"
        try:
            if getattr(parent, "closing", False) or self._draining:
                parent.inject(text, source=source)
            elif parent.status == "idle":
                parent.followup(text, source=source)
            else:
                parent.steer(text, source=source)
        except Exception:
            log.exception("settlement notice for %s could not be delivered", activation.agent.id)

    # -- report / interrupt -------------------------------------------------------------------
    def report_from(
        self, child: Agent, content: str, *, delivery: ReportDelivery = "next-step"
    ) -> None:
        active = self._active.get(child.id)
        if active is None or active.agent is not child:
            raise SubagentError("only a resident continuable child may report", code="UNAUTHORIZED")
        registry = self.ctx.get(AGENTS_SERVICE)
        parent = registry.get(active.parent_id) if registry is not None else None
        if parent is None:
            raise SubagentError(
                f"the parent of subagent {child.id} is not live", code="PARENT_UNAVAILABLE"
            )
        source: dict[str, JsonValue] = {
            "kind": "subagent-report",
            "form": "relay",
            "sender_session_id": child.id,
        }
        text = f"Background subagent {child.id} reported: {content}"
        if delivery == "quiet":
            parent.inject(text, source=source)
        else:
            parent.steer(text, source=source)

    def interrupt(self, target_id: str, authority: Authority) -> bool:
        """Cancel a resident child's current turn, parking its queued work.

        An absent, one-shot or already disposing target is an accepted no-op.
        """
        active = self._active.get(target_id)
        if active is None:
            return True
        if isinstance(authority, UserAuthority):
            allowed = authority.parent_session_id == active.parent_id
        else:
            allowed = authority.agent is not active.agent and self._is_live_ancestor(
                authority.agent, active.agent
            )
        if not allowed:
            raise SubagentError(
                f"not allowed to interrupt subagent {target_id}", code="UNAUTHORIZED"
            )
        active.agent.cancel("parent", keep_inbox=True)
        return True

    def _is_live_ancestor(self, candidate: Agent, target: Agent) -> bool:
        registry = self.ctx.get(AGENTS_SERVICE)
        if registry is None or registry.get(candidate.id) is not candidate:
            return False
        parent_id = target.session.header.parent_session
        seen: set[str] = set()
        while parent_id is not None and parent_id not in seen:
            seen.add(parent_id)
            if parent_id == candidate.id:
                return True
            live = registry.get(parent_id)
            if live is None:
                return False
            parent_id = live.session.header.parent_session
        return False

    # -- narrowing ----------------------------------------------------------------------------
    async def narrow(self, by: Agent, child_id: str, mode: SandboxMode | str) -> bool:
        """Narrow a descendant of ``by`` (live or stored); it can never widen it."""
        active = self._active.get(child_id)
        registry = self.ctx.get(AGENTS_SERVICE)
        live = (
            active.agent
            if active is not None
            else (registry.get(child_id) if registry is not None else None)
        )
        if live is not None:
            if not self._is_live_ancestor(by, live):
                raise SubagentError(
                    f"not allowed to narrow subagent {child_id}", code="UNAUTHORIZED"
                )
            return narrow_live(self.ctx, live, mode)
        # The same per-child lock as followup: a cold resume cannot start mid-narrowing.
        async with self._locks.setdefault(child_id, asyncio.Lock()):
            disposing = self._disposing.get(child_id)
            if disposing is not None:
                await asyncio.shield(disposing)
            if child_id in self._active:  # resumed while we waited: narrow it live
                return await self.narrow(by, child_id, mode)
            return await self._narrow_stored(by, child_id, mode)

    async def _narrow_stored(self, by: Agent, child_id: str, mode: SandboxMode | str) -> bool:
        store = require_store(by)
        if store.persistence is None:
            raise SubagentError(
                "narrowing a stored child needs persistence", code="PERSISTENCE_UNAVAILABLE"
            )
        stored = await self._inspect(child_id)
        if stored is None or stored.header.parent_session != by.id:
            raise SubagentError(
                f"only the direct parent may narrow stored subagent {child_id}", code="UNAUTHORIZED"
            )
        return await narrow_stored(store.persistence, child_id, mode)

    # -- listing ------------------------------------------------------------------------------
    async def list_children(self, parent_id: str, *, descendants: bool = False) -> list[ChildRow]:
        """Continuable children (or all descendants) of ``parent_id``, from live state and the
        store; never activates a child."""
        registry = self.ctx.get(AGENTS_SERVICE)
        store = self.ctx.get(SESSIONS_SERVICE)
        headers: list[SessionHeader] = []
        if store is not None and store.persistence is not None:
            headers = await store.persistence.list()
        live_headers = {s.id: s.header for s in (store.live() if store is not None else [])}
        by_id = {h.id: h for h in headers} | live_headers
        children: dict[str | None, list[SessionHeader]] = {}
        for header in by_id.values():
            if header.delegation_depth > 0:
                children.setdefault(header.parent_session, []).append(header)
        approval = self.ctx.get(APPROVAL_SERVICE)
        pending = approval.pending() if approval is not None else []
        blocked = blocked_labels(
            PendingQuestion(p.id, p.child_session_id, p.headline, p.lineage) for p in pending
        )
        rows: list[ChildRow] = []
        frontier = [parent_id]
        while frontier:
            current = frontier.pop(0)
            for header in sorted(children.get(current, []), key=lambda h: h.created_at):
                stored, problem = await self._inspect_or_problem(header.id)
                if stored is None:
                    rows.append(
                        ChildRow(
                            header.id,
                            None,
                            "ready",
                            header.delegation_depth,
                            current,
                            diagnostic=problem,
                        )
                    )
                    continue
                descriptor = fold_descriptor(stored.events, header.seed_length or 0)
                if descriptor is None or descriptor.mode != "continuable":
                    continue
                active = self._active.get(header.id)
                status: Literal["running", "idle", "ready"] = (
                    "ready" if active is None else active.agent.status
                )
                if registry is not None and active is None and registry.get(header.id) is not None:
                    status = "idle"
                rows.append(
                    ChildRow(
                        header.id,
                        descriptor.label,
                        status,
                        header.delegation_depth,
                        current,
                        blocked.get(header.id),
                        last_denial(stored.events[header.seed_length or 0 :]),
                    )
                )
                if descendants:
                    frontier.append(header.id)
        return rows

    async def _inspect(self, session_id: str) -> StoredSession | None:
        return (await self._inspect_or_problem(session_id))[0]

    async def _inspect_or_problem(self, session_id: str) -> tuple[StoredSession | None, str]:
        store = self.ctx.get(SESSIONS_SERVICE)
        if store is None:
            return None, "unavailable"
        try:
            stored: StoredSession = await store.inspect(session_id)
        except Exception as err:
            return None, str(getattr(err, "code", type(err).__name__)).lower()
        return stored, ""

    # -- shutdown -----------------------------------------------------------------------------
    async def drain(self) -> None:
        """Close admission, then stop and dispose every resident child, deepest first."""
        self._draining = True
        while self._active or self._disposing:
            for activation in sorted(self._active.values(), key=lambda a: -a.agent.depth):
                activation.agent.cancel("disposed", keep_inbox=True)
            await self.when_quiescent()
