"""The Python front door: one object that composes a store, the kernel, the policy plugins,
the tools and a root agent, mirroring ``tether run`` (``docs/design.md`` §3).

::

    async with Harness.open(workspace=".", model="scripted:demo.json") as harness:
        result = await harness.run("Rename the parser module")

The root session's permission facts are written into its log before it is published:
``--sandbox``/``--approval`` when given, otherwise the default preset's. Resume replays the
stored log and never re-applies these options (``docs/design.md`` §2, principle 1).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Literal, NamedTuple

from tether._collector_pace import collector_paced
from tether._signals import cancel_and_wait
from tether.agent import (
    AGENTS_SERVICE,
    PENDING_WORK,
    PROJECT_INSTRUCTIONS,
    Agent,
    AgentRegistry,
    StopReason,
)
from tether.agent._agent import DEFAULT_MAX_STEPS, AgentOptions
from tether.agent._compaction import CompactionError
from tether.agent._instructions import ProjectInstructions
from tether.errors import TetherError
from tether.kernel import SESSIONS_SERVICE, WORKSPACE_FILES, Next, PluginEntry, WorkspaceTrust
from tether.kernel._config import load_plugins, resolve_plugin
from tether.kernel._plugin import Kernel
from tether.kernel._trust_store import TrustStore
from tether.kernel._workspace_trust import (
    InspectedWorkspace,
    inspect_workspace,
    parse_workspace_trust,
)
from tether.model import ModelClient
from tether.model._settings import load_model_config, resolve_model
from tether.policy._approval import (
    APPROVAL_SERVICE,
    Answer,
    ApprovalReply,
    ApprovalRequest,
    register_answerer,
)
from tether.policy._modes import parse_approval_policy, parse_sandbox_mode
from tether.policy._permissions import (
    PERMISSION_RULES,
    Held,
    PermissionRules,
    held_grants,
    revoke,
)
from tether.policy._presets import DEFAULT_PRESET, PERMISSION_PRESETS_SERVICE
from tether.policy._rule_sources import load_permission_rules
from tether.policy._sandbox_policy import SANDBOX_POLICY_SERVICE
from tether.sandbox import SANDBOX_SERVICE, SandboxError, SandboxProvider, rules_for
from tether.session import Event, Persistence, Session, SessionMeta, SessionStore
from tether.session._answer_box import AnswerBox
from tether.session._lease import Leases
from tether.session._store_files import store_url_of
from tether.session.persistence import default_store_url, open_persistence
from tether.session.persistence._base import OpensFiles
from tether.session.persistence._commits import Commit, commits_of
from tether.subagents._continuation import SUBAGENTS_SERVICE
from tether.tools._ask_user import AskUserTool
from tether.tools._jobs import JOBS_SERVICE
from tether.tools._pipeline import TOOLS_SERVICE, ToolRuntime
from tether.tools.fs import file_tools

ApproverFn = Callable[[ApprovalRequest], Awaitable[str | Answer] | str | Answer]
"""A Python answerer: an outcome's value, or an :class:`Answer` (one that grants may choose
its scope among ``request.choices``)."""

RunStopReason = StopReason | Literal["max-turns"]
"""How a run ended: its last root turn's reason, or ``max-turns`` when the run stopped short
of queued work at its turn limit."""


class InvalidLimitError(TetherError):
    """``max_steps`` or ``max_turns`` is not a whole number of at least 1."""

    code = "INVALID_LIMIT"


def _limit(name: str, value: int | None) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise InvalidLimitError(f"{name} must be a whole number of at least 1, got {value!r}")
    return value


StreamFeed = Literal["committed", "appended"]
"""When :meth:`Harness.stream` yields an event: once the store committed it, or as it is
appended to a live session."""


class SessionEvent(NamedTuple):
    session_id: str
    event: Event


@dataclass(frozen=True, slots=True)
class RunResult:
    session_id: str
    stop_reason: RunStopReason
    output: str
    error: str | None = None


class Harness:
    def __init__(
        self,
        kernel: Kernel,
        store: SessionStore,
        model: ModelClient,
        tools: ToolRuntime,
        agents: AgentRegistry,
        *,
        workspace: str,
        sandbox: str | None,
        approval: str | None,
        permission: str | None = None,
        max_steps: int = DEFAULT_MAX_STEPS,
        max_turns: int | None = None,
    ) -> None:
        self.kernel = kernel
        self.ctx = kernel.ctx
        self.store = store
        self.model = model
        self.tools = tools
        self.workspace = workspace
        self._sandbox = sandbox
        self._approval = approval
        self._permission = permission
        self.agents = agents
        self.root: Agent | None = None
        self.max_steps = max_steps
        self.max_turns = max_turns
        """Turns one :meth:`run` (or :meth:`stream`) may take on the root (``None``: no limit)."""

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        *,
        workspace: str | os.PathLike[str] = ".",
        model: str | ModelClient | None = None,
        store: str | Persistence | None = None,
        sandbox: str | None = None,
        approval: str | None = None,
        permission: str | None = None,
        approver: ApproverFn | None = None,
        plugins: Sequence[str | PluginEntry] = (),
        config: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        workspace_trust: WorkspaceTrust | str = WorkspaceTrust.RECORDED,
        stream: bool | None = None,
        model_timeout: float | None = None,
        system_prompt: str | None = None,
        append_system_prompt: str | None = None,
        max_steps: int | None = None,
        max_turns: int | None = None,
    ) -> AsyncIterator[Harness]:
        """Compose a harness. ``config`` is a ``tether.toml``; by default the workspace's own
        ``tether.toml`` is read when it exists. Its plugins load before ``plugins``.

        Configuration from the workspace (its ``tether.toml``, a ``config`` inside it, and the
        files their plugins read, such as hook settings files) is used only as
        ``workspace_trust`` says: ``recorded`` (the default) refuses with
        ``WORKSPACE_UNTRUSTED`` unless the user trusted exactly this content (``tether
        trust``); ``once`` trusts the current content for this harness without recording it;
        ``ignore`` composes without it. A ``config`` outside the workspace is the caller's own
        file and needs no trust. The check runs before the store is opened or a model called.

        ``model`` is a client, a configured model's name or ``KIND:TARGET``; without it,
        ``TETHER_MODEL``, else the default of the configuration (the user's file, then the
        workspace's trusted ``tether.toml``; ``docs/models.md``). ``stream=False`` asks the
        model without streaming whatever its configuration says; ``model_timeout`` replaces
        its read timeout (seconds of silence before ``MODEL_TIMEOUT``).

        ``permission`` names the preset a new root session starts in (``read-only``, ``plan``,
        ...; ``UNKNOWN_PRESET`` before any model call otherwise); ``sandbox`` and ``approval``
        set the knobs one at a time, and replace the preset's knob where both are given.

        ``system_prompt`` replaces tether's system prompt; ``append_system_prompt`` is added
        after it. ``max_steps`` bounds each turn (default 50), ``max_turns`` each run (default
        none). Each overrides the configuration's ``[agent]`` value
        (``docs/instructions.md``).
        """
        env = os.environ if env is None else env
        inspected = cls.inspect_workspace(
            workspace=workspace,
            config=config,
            plugins=plugins,
            store=store,
            env=env,
            workspace_trust=workspace_trust,
        )
        inspected.require()
        rules = load_permission_rules(inspected, env)
        root = inspected.root
        settings = inspected.agent
        if system_prompt is None:
            system_prompt = inspected.system_prompt()
        if append_system_prompt is None:
            append_system_prompt = settings.append_system_prompt
        steps = _limit("max_steps", max_steps if max_steps is not None else settings.max_steps)
        turns = _limit("max_turns", max_turns if max_turns is not None else settings.max_turns)
        if sandbox is not None:
            sandbox = parse_sandbox_mode(sandbox).value
        if approval is not None:
            approval = parse_approval_policy(approval).value
        if model is not None and not isinstance(model, str):
            client = model
        else:
            models = load_model_config(env, inspected.config)
            client = resolve_model(
                model, env, config=models, stream=stream, read_timeout=model_timeout
            )
        leases = None
        if store is None or isinstance(store, str):
            url = store or default_store_url(env)
            persistence: Persistence = open_persistence(url)
            if store_url_of(persistence) is not None:  # memory:// has no other process to keep out
                leases = Leases.for_store(url)  # a Persistence object passed in has no location
        else:
            persistence = store
        # The collector's pace for an allocation-heavy workload, while this harness is open.
        with collector_paced():
            kernel = Kernel()
            session_store = SessionStore(persistence, leases=leases)
            kernel.ctx.provide(SESSIONS_SERVICE, session_store)
            kernel.ctx.provide(PERMISSION_RULES, rules)
            try:
                kernel.load(
                    resolve_plugin("system_prompt"),
                    {"replace": system_prompt, "append": append_system_prompt},
                )
                kernel.load(
                    resolve_plugin("sandbox_policy"), {"mode": "read-only", "workspace_root": root}
                )
                kernel.load(resolve_plugin("approval"), {"policy": "ask"})
                kernel.load(resolve_plugin("permission_presets"), {"default": DEFAULT_PRESET})
                if permission is not None:
                    kernel.ctx.require(PERMISSION_PRESETS_SERVICE).preset(permission)
                tools = ToolRuntime(kernel.ctx)
                kernel.ctx.provide(TOOLS_SERVICE, tools)
                for tool in file_tools():
                    tools.register(tool)
                tools.register(AskUserTool())
                if approver is not None:
                    register_answerer(kernel.ctx, _answerer(approver))
                registry = AgentRegistry()
                kernel.ctx.provide(AGENTS_SERVICE, registry)
                kernel.ctx.provide(WORKSPACE_FILES, inspected.files)
                load_plugins(kernel, inspected.entries)
                await _protect_store(kernel.ctx.get(SANDBOX_SERVICE), persistence, root)
                ctx = kernel.ctx
                kernel.ctx.provide(
                    PROJECT_INSTRUCTIONS,
                    ProjectInstructions(rules=lambda: rules_for(ctx.get(SANDBOX_SERVICE)), env=env),
                )
                harness = cls(
                    kernel,
                    session_store,
                    client,
                    tools,
                    registry,
                    workspace=root,
                    sandbox=sandbox,
                    approval=approval,
                    permission=permission,
                    max_steps=steps if steps is not None else DEFAULT_MAX_STEPS,
                    max_turns=turns,
                )
                try:
                    yield harness
                except BaseException:
                    # The body failed or was cancelled: turns still running have nobody left to
                    # report to, so they end (``disposed``) before the same shutdown runs.
                    harness._abandon_turns()
                    await harness.shutdown()
                    raise
                await harness.shutdown()
            finally:
                try:
                    await kernel.aclose()
                finally:
                    await session_store.close()

    @staticmethod
    def inspect_workspace(
        *,
        workspace: str | os.PathLike[str] = ".",
        config: str | os.PathLike[str] | None = None,
        plugins: Sequence[str | PluginEntry] = (),
        store: str | Persistence | None = None,
        env: Mapping[str, str] | None = None,
        workspace_trust: WorkspaceTrust | str = WorkspaceTrust.RECORDED,
    ) -> InspectedWorkspace:
        """What :meth:`open` with these arguments reads from the workspace, and whether the
        user trusted it (``tether trust`` shows this; ``record_trust`` records it)."""
        root = os.path.realpath(os.fspath(workspace))
        defaults = [
            PluginEntry(name="sandbox"),
            PluginEntry(name="bash"),
            PluginEntry(name="subagents"),
        ]
        return inspect_workspace(
            root,
            config=config,
            defaults=defaults,
            plugins=[p if isinstance(p, PluginEntry) else PluginEntry(name=p) for p in plugins],
            trust=parse_workspace_trust(workspace_trust),
            store=TrustStore.for_user(os.environ if env is None else env),
        )

    # -- sessions ----------------------------------------------------------------------------
    def new_root_session(self) -> Session:
        """Prepare the root session, write its explicit knobs, then publish it."""
        session = self.store.prepare(meta=SessionMeta(cwd=self.workspace))
        if self._permission is not None:
            self.ctx.require(PERMISSION_PRESETS_SERVICE).pin_preset(
                session, self._permission, sandbox=self._sandbox, approval=self._approval
            )
        else:
            if self._sandbox is not None:
                self.ctx.require(SANDBOX_POLICY_SERVICE).set_sandbox_mode(session, self._sandbox)
            if self._approval is not None:
                self.ctx.require(APPROVAL_SERVICE).set_approval_policy(session, self._approval)
        self.store.enter(session)
        self.store.announce(session)
        return session

    def agent_for(self, session: Session, *, options: AgentOptions | None = None) -> Agent:
        options = options or AgentOptions(self.model, max_steps=self.max_steps)
        agent = Agent(self.ctx, session, options, tools=self.tools)
        self.agents.register(agent)
        return agent

    async def resume(self, session_id: str) -> Agent:
        """Cold resume: the stored log is the state; no option is re-applied."""
        session = await self.store.open(session_id)
        return self.agent_for(session)

    async def compact(self, *, resume: str | None = None) -> Event:
        """Summarise the root session's conversation so far (``/compact``): one model
        request, recorded as a ``context/compacted`` event, which is returned (flushed to the
        store). Between runs only; see :meth:`tether.agent.Agent.compact` for the errors."""
        if self.root is None and resume is None:
            raise CompactionError(
                "this harness has no session yet: run a prompt first, or pass resume=ID",
                code="NOTHING_TO_COMPACT",
            )
        agent = await self._root_agent(resume)
        event = await agent.compact()
        await self.store.flush(agent.session)
        return event

    async def run(self, prompt: str, *, resume: str | None = None) -> RunResult:
        """One root turn, then every turn its background children cause, until all is quiet.
        When it returns, the root's log is committed (durable against a power loss within
        a second, or when the harness closes; every approved action's audit pair already
        was before the action ran)."""
        agent = await self._root_agent(resume)
        agent.limit_turns(self.max_turns)
        try:
            agent.followup(prompt)
            await self.settle()
        finally:
            agent.lift_turn_limit()
        await self.store.commit(agent.session)
        return self.result_of(agent)

    @staticmethod
    def result_of(agent: Agent) -> RunResult:
        """The run's result: its last root turn's, unless the run stopped at its turn limit
        (read before the next run starts)."""
        result = agent.last_result
        assert result is not None
        if agent.turn_limit_reached is not None:
            return RunResult(agent.id, "max-turns", result.output, agent.turn_limit_reached)
        return RunResult(agent.id, result.stop_reason, result.output, result.error)

    async def settle(self) -> None:
        """Wait until the root is idle and no background child is resident."""
        manager = self.ctx.get(SUBAGENTS_SERVICE)
        while True:
            for agent in list(self.agents):
                await agent.when_idle()
            if manager is not None:
                await manager.when_quiescent()
            for pending in self.ctx.collect(PENDING_WORK, None):
                await pending  # a Stop hook may still queue a continuation
            await asyncio.sleep(0)
            if all(a.status == "idle" and not a.inbox.has_work() for a in self.agents) and (
                manager is None or not manager.resident()
            ):
                return

    async def shutdown(self) -> None:
        """Drain background children (deepest first), then let the roots finish."""
        for agent in list(self.agents):
            agent.closing = True
        manager = self.ctx.get(SUBAGENTS_SERVICE)
        if manager is not None:
            await manager.drain()
        for agent in list(self.agents):
            await agent.when_idle()
        jobs = self.ctx.get(JOBS_SERVICE)
        if jobs is not None:
            await jobs.aclose()

    def _abandon_turns(self) -> None:
        for agent in list(self.agents):
            agent.cancel("disposed")

    async def stream(
        self, prompt: str, *, resume: str | None = None, feed: StreamFeed = "committed"
    ) -> AsyncIterator[SessionEvent]:
        """Every event the run commits to any session, once the store has committed it, in
        commit order: each session the run creates from its seq 0, a resumed one from the
        first event the run adds (``docs/reliability.md``).
        Nothing yielded can be lost by a crash; the stream ends after the run has settled and
        every live session is flushed, so nothing of the run is committed after it.

        A consumer that stops early (leaves its ``async for``, or closes the generator) stops
        the wait for the run to settle; the run itself goes on. A backend that cannot report
        its commits raises ``COMMITS_NOT_REPORTED`` before the run starts.

        ``feed="appended"`` yields each event of a live session as it is appended instead,
        before it is durable and without seed events: what an interactive view shows at once
        (``tether chat``), never what a consumer should rely on."""
        queue: asyncio.Queue[SessionEvent | None] = asyncio.Queue()

        def committed(commit: Commit) -> None:
            for event in commit.events:
                queue.put_nowait(SessionEvent(commit.session_id, event))

        if feed == "committed":
            remove = commits_of(self.store.persistence).on_commit(committed)
        else:
            remove = self.store.on_event(lambda s, e: queue.put_nowait(SessionEvent(s.id, e)))
        waiter: asyncio.Task[None] | None = None
        try:
            agent = await self._root_agent(resume)
            agent.limit_turns(self.max_turns)
            agent.followup(prompt)

            async def finish() -> None:
                try:
                    await self.settle()
                    # Children stay live after they settle; their last events are written
                    # behind like the root's, and the stream ends only after those commits.
                    for session in self.store.live():
                        await self.store.commit(session)
                finally:
                    agent.lift_turn_limit()
                    queue.put_nowait(None)

            waiter = self.ctx.spawn(finish(), name="harness stream", report=False)
            while (item := await queue.get()) is not None:
                yield item
            await waiter
        finally:
            remove()
            if waiter is not None and not waiter.done():
                await cancel_and_wait(waiter)

    # -- grants and rules ----------------------------------------------------------------------
    @property
    def permission_rules(self) -> PermissionRules:
        """The permission rules this harness decides by (``docs/guide-permissions.md``)."""
        return self.ctx.require(PERMISSION_RULES)

    def grants(self) -> list[Held]:
        """The grants in force: the root session's (none before the first run), then the
        user's always rules for this workspace."""
        return held_grants(self.permission_rules, None if self.root is None else self.root.session)

    async def revoke_grant(self, wanted: str, *, by: str = "Harness.revoke_grant") -> Held:
        """Revoke a session grant of the root session, or one of the user's always rules for
        this workspace, by its id or a unique prefix of it; a session grant's revocation is
        flushed before returning. Raises ``GRANT_NOT_FOUND``."""
        session = None if self.root is None else self.root.session
        revoked = revoke(self.permission_rules, session, wanted, by=by)
        if session is not None and revoked.kind == "session":
            await self.store.flush(session)
        return revoked

    async def _root_agent(self, resume: str | None) -> Agent:
        if self.root is None:
            self.root = (
                await self.resume(resume) if resume else self.agent_for(self.new_root_session())
            )
        return self.root


def _answerer(
    fn: ApproverFn,
) -> Callable[[ApprovalRequest, Next[ApprovalReply]], Awaitable[str | Answer]]:
    async def answer(request: ApprovalRequest, _next: Next[ApprovalReply]) -> str | Answer:
        value = fn(request)
        return await value if isinstance(value, Awaitable) else value

    return answer


async def _protect_store(sandbox: object, persistence: Persistence, workspace: str) -> None:
    """Refuse to start when the store's files cannot be kept from every command and file
    tool (:meth:`SandboxProvider.check_workspace`), and make the store's files and its answer
    box exist before any command runs: bubblewrap masks what exists when a command starts,
    and a file created later would be visible to a command already running (and one that
    comes and goes, SQLite's rollback journal as a new database is made, would fail its
    mask)."""
    if not isinstance(sandbox, SandboxProvider):
        raise SandboxError(
            "the composed sandbox service is not tether's, so the session store's files "
            "cannot be hidden from commands and file tools; compose the sandbox plugin",
            code="STORE_UNPROTECTED",
        )
    sandbox.check_workspace(workspace)
    url = store_url_of(persistence)
    if url is not None:
        AnswerBox.for_store(url).prepare()
    if isinstance(persistence, OpensFiles):
        await persistence.open()
