"""The ``hooks`` plugin: Claude Code command hooks bridged onto tether's interception points.

=====================  ===================================  =========================================
Claude Code event      tether point                         effect of the merged reply
=====================  ===================================  =========================================
``PreToolUse``         ``tools/pre-execute`` waterfall      deny → deny; ask → ask (the approval
                                                            service asks); allow / nothing → the
                                                            rest of the chain decides
``PostToolUse``        ``tools/post-execute`` waterfall     block → the result becomes
                                                            ``Error: <reason>``
``UserPromptSubmit``   ``agent/pre-turn``, before the       block → the prompt is rejected: no
                       prompt opens a turn                  turn opens, nothing is logged
``Stop``               ``agent/turn-end`` (root agents)     block → the reason is queued as a
                                                            followup turn
``SubagentStart``      ``subagent/start`` notification      context → injected at the child's
                                                            first step (which waits for it)
``SubagentStop``       ``subagent/end`` notification        reported only
``SessionStart``       ``sessions.on_created`` (and         context → injected at the first step
                       ``agent/session-start``)
=====================  ===================================  =========================================

Context (``additionalContext``, or plain stdout for UserPromptSubmit/SessionStart) reaches the
model as an injected ``user/message`` with source ``{kind: plugin, plugin: hooks, hook_event}``.
A hook ``allow`` never overrides another listener's deny or ask: tether has no permission
prompt for it to skip, only other policies, and those keep their say.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Coroutine, Sequence
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from tether.agent import (
    PENDING_WORK,
    PRE_STEP,
    SESSION_START,
    TURN_END,
    Agent,
    PreStep,
    PreStepDecision,
    TurnEnded,
)
from tether.agent._agent import PRE_TURN, PreTurn, TurnRejected
from tether.errors import TetherError
from tether.kernel import (
    SESSIONS_SERVICE,
    WORKSPACE_FILES,
    AnyServiceKey,
    Context,
    Next,
    PluginConfigError,
)
from tether.kernel._printable import printable
from tether.kernel._workspace_files import WorkspaceFiles
from tether.plugins.hooks._codex import parse_codex_file
from tether.plugins.hooks._matchers_check import report_unknown_tool_matchers
from tether.plugins.hooks._payload import (
    call_arguments,
    claude_tool_input,
    claude_tool_name,
    claude_tool_response,
    tool_names,
)
from tether.plugins.hooks._service import (
    HOOKS_SERVICE,
    Dispatch,
    HookService,
    HookSettings,
    Record,
    context_source,
    write_records,
)
from tether.plugins.hooks._settings import (
    HookEvent,
    HookHandler,
    HookSettingsError,
    parse_hooks_block,
    parse_settings_file,
    settings_paths,
)
from tether.policy._sandbox_policy import SANDBOX_POLICY_SERVICE
from tether.session import JsonValue, Session
from tether.subagents._lifecycle import SubagentLifecycle
from tether.subagents._seams import SUBAGENT_END, SUBAGENT_START
from tether.tools._base import PostDecision, PreDecision, ToolCall, ToolResult
from tether.tools._pipeline import TOOLS_SERVICE
from tether.tools._seams import POST_EXECUTE, PRE_EXECUTE

log = logging.getLogger(__name__)


class HooksConfig(BaseModel):
    """The plugin's configuration (``[[plugins]] name = "hooks"`` in ``tether.toml``)."""

    model_config = ConfigDict(extra="forbid")

    hooks: dict[str, object] = Field(default_factory=dict)
    """Inline hooks, Claude Code's shape: ``{PreToolUse = [{matcher = "Bash", hooks = [...]}]}``."""
    settings_files: list[str] = Field(default_factory=list)
    """``.claude/settings.json``-style files whose ``hooks`` block is added after the inline
    hooks, in order. Missing files are skipped; malformed ones fail the load. They are
    declared to workspace trust (``workspace_files``): one in the workspace, or listed by the
    workspace's ``tether.toml``, is used only with content the user trusted."""
    codex_files: list[str] = Field(default_factory=list)
    """Codex hook files (``._codex/hooks.json``, or a ``._codex/config.toml`` with a ``[hooks]``
    table), added after the settings files, in order; their handlers speak the Codex dialect.
    Declared to workspace trust like ``settings_files``."""
    project_dir: str | None = None
    """Base for relative ``settings_files`` (default: the sandbox policy's workspace root,
    else the process cwd at load)."""
    default_timeout: float = Field(default=600.0, gt=0, allow_inf_nan=False)
    """Seconds a command may run when its handler sets no ``timeout`` (Claude Code: 10 min)."""
    pass_env: list[str] = Field(default_factory=list)
    """Environment variables passed to hooks besides PATH, HOME, LANG and TERM."""
    fail_closed: bool = True
    """When true, a PreToolUse hook that errors, times out or prints an invalid reply denies
    the call. Default false: such a hook is reported and makes no decision (Claude Code)."""

    @field_validator("hooks")
    @classmethod
    def _check_hooks(cls, value: dict[str, object]) -> dict[str, object]:
        try:
            parse_hooks_block(value, "tether.toml", strict=True)
        except HookSettingsError as err:
            # A custom error keeps pydantic's "Value error, " prefix out of the message.
            raise PydanticCustomError("hook_settings", str(err)) from None
        return value

    def inline_handlers(self) -> list[HookHandler]:
        return parse_hooks_block(self.hooks, "tether.toml", strict=True)


def load_handlers(
    config: HooksConfig, base_dir: str, files: WorkspaceFiles | None
) -> list[HookHandler]:
    """Inline handlers, then each settings file's, in order; relative files are resolved
    against ``base_dir``. Settings files are read only through ``files`` (the composition's
    ``workspace_files``), which serves the content workspace trust checked."""
    handlers = config.inline_handlers()
    if not config.settings_files and not config.codex_files:
        return handlers
    if files is None:
        raise HookSettingsError(
            "settings_files are read only through the workspace_files service, which checks "
            "workspace trust: compose with Harness.open, or provide the files of "
            "tether.kernel.inspect_workspace(...) as service 'workspace_files'"
        )
    for listed, parse in (
        (config.settings_files, parse_settings_file),
        (config.codex_files, parse_codex_file),
    ):
        for source, path in zip(listed, settings_paths(listed, base_dir), strict=True):
            try:
                data = files.read(path)
            except TetherError as err:
                raise HookSettingsError(str(err)) from err
            handlers.extend(parse(data, source))
    return handlers


class HookBridge:
    """The listeners that connect the :class:`HookService` to tether's points."""

    def __init__(self, service: HookService) -> None:
        self.service = service
        self._continued: set[str] = set()
        """Agents whose current turn was started by a blocking Stop hook (stop_hook_active)."""
        self._pending: dict[str, list[tuple[HookEvent, asyncio.Task[Dispatch]]]] = {}
        """Session id -> background SessionStart/SubagentStart runs its first step waits for."""
        self._session_seen: set[str] = set()
        self._held: dict[str, tuple[object, list[Record]]] = {}
        """Session id -> (prompt, the records of the UserPromptSubmit hooks that let it open a
        turn), written at the first step of that prompt's turn."""

    # -- PreToolUse ------------------------------------------------------------------------
    async def pre_execute(self, call: ToolCall, next: Next[PreDecision]) -> PreDecision:
        service = self.service
        name = claude_tool_name(call.name)
        names = tool_names(call.name)
        if not service.matching(HookEvent.PRE_TOOL_USE, names):
            return await next()
        session = _session_of(call.agent)
        workspace = service.workspace(session, call.policy)
        fields: dict[str, JsonValue] = {
            "tool_name": name,
            "tool_input": claude_tool_input(call.name, call_arguments(call), workspace),
            "tool_use_id": call.call_id,
        }
        run = await service.dispatch(
            HookEvent.PRE_TOOL_USE,
            fields,
            session=session,
            subject=names,
            workspace=workspace,
            signal=call.signal,
        )
        merged = run.merged
        _inject(call.agent, merged.contexts, HookEvent.PRE_TOOL_USE)
        if merged.decision in ("deny", "block"):
            return PreDecision.deny(merged.reason or "blocked by a PreToolUse hook")
        downstream = await next()
        if merged.decision == "ask" and isinstance(downstream, PreDecision):
            # deny > ask: a later listener's deny stands; anything else becomes our ask.
            return downstream if downstream.kind == "deny" else PreDecision.ask(merged.reason)
        return downstream

    # -- PostToolUse -----------------------------------------------------------------------
    async def post_execute(
        self, item: tuple[ToolCall, ToolResult], next: Next[PostDecision]
    ) -> PostDecision:
        call, result = item
        decision = await next()
        if not isinstance(decision, PostDecision) or decision.kind == "block":
            return decision
        final = decision.result or result
        name = claude_tool_name(call.name)
        names = tool_names(call.name)
        # Claude Code runs PostToolUse after a tool *succeeded*; scripts assume it did.
        if final.is_error or not self.service.matching(HookEvent.POST_TOOL_USE, names):
            return decision
        session = _session_of(call.agent)
        workspace = self.service.workspace(session, call.policy)
        tool_input = claude_tool_input(call.name, call_arguments(call), workspace)
        fields: dict[str, JsonValue] = {
            "tool_name": name,
            "tool_input": tool_input,
            "tool_response": claude_tool_response(name, tool_input, final),
            "tool_use_id": call.call_id,
        }
        run = await self.service.dispatch(
            HookEvent.POST_TOOL_USE,
            fields,
            session=session,
            subject=names,
            workspace=workspace,
            signal=call.signal,
        )
        _inject(call.agent, run.merged.contexts, HookEvent.POST_TOOL_USE)
        if run.merged.decision == "block":
            return PostDecision("block", feedback=run.merged.reason)
        return decision

    # -- SessionStart / UserPromptSubmit ----------------------------------------------------
    def session_created(self, session: Session) -> None:
        """``sessions.on_created``: never raises (a raise would veto the session)."""
        try:
            self._start_session(session)
        except Exception:
            log.exception("hooks: SessionStart for %s failed", session.id)

    def session_disposed(self, session: Session) -> None:
        """Forget a detached session (a long-lived process sees many)."""
        self._session_seen.discard(session.id)
        self._continued.discard(session.id)
        self._pending.pop(session.id, None)
        self._held.pop(session.id, None)

    def agent_session_start(self, agent: Agent) -> None:
        session = _session_of(agent)
        if session is not None:
            self.session_created(session)

    def _start_session(self, session: Session) -> None:
        if session.id in self._session_seen or session.header.origin == "subagent":
            return
        self._session_seen.add(session.id)
        if not self.service.has(HookEvent.SESSION_START):
            return
        source = "resume" if session.first_live_seq > 0 else "startup"
        self._hold(
            session.id,
            HookEvent.SESSION_START,
            self.service.dispatch(
                HookEvent.SESSION_START,
                {"source": source},
                session=session,
                subject=source,
                background=True,
            ),
        )

    def _hold(
        self, session_id: str, event: HookEvent, run: Coroutine[object, object, Dispatch]
    ) -> None:
        """Run ``run`` in the background; the session's first step waits for it and injects
        its context, so the context is in place before the first model request."""
        task = self.service.spawn(run, event.value)
        self._pending.setdefault(session_id, []).append((event, task))

    async def pre_turn(self, item: PreTurn, next: Next[TurnRejected | None]) -> TurnRejected | None:
        """``UserPromptSubmit``, before the prompt opens a turn: a block rejects it with no
        turn in the log (Claude Code's order); otherwise its records wait for the turn."""
        agent = item.agent
        session = _session_of(agent)
        prompt = _user_prompt(item.prompt)
        if session is None or prompt is None or agent.depth != 0:
            return await next()
        # Context from SessionStart goes first, as when it is claimed at the first step.
        await self._claim_pending(agent, session)
        records: list[Record] = []
        run = await self.service.dispatch(
            HookEvent.USER_PROMPT_SUBMIT, {"prompt": prompt}, session=session, deferred=records
        )
        if run.merged.decision == "block":
            reason = run.merged.reason or "blocked by a UserPromptSubmit hook"
            # Said where the user looks (chat shows warnings; no turn shows it otherwise).
            log.warning("hooks: a UserPromptSubmit hook blocked the prompt: %s", printable(reason))
            return TurnRejected(f"a UserPromptSubmit hook blocked the prompt: {reason}")
        self._held[session.id] = (item.prompt, records)
        _inject(agent, run.merged.contexts, HookEvent.USER_PROMPT_SUBMIT)
        return await next()

    async def pre_step(self, step: PreStep, next: Next[PreStepDecision]) -> PreStepDecision:
        if step.step != 1:
            return await next()
        session = _session_of(step.agent)
        if session is not None:
            prompt, records = self._held.pop(session.id, (None, []))
            if prompt is not None and prompt is step.prompt:  # never into another turn
                write_records(session, records)
            await self._claim_pending(step.agent, session)
        return await next()

    async def _claim_pending(self, agent: Agent, session: Session) -> None:
        """Wait for the session's SessionStart/SubagentStart runs and inject their context."""
        for event, task in self._pending.pop(session.id, []):
            # wait() rather than await: our own cancellation must not cancel the shared run.
            await asyncio.wait({task})
            if not task.cancelled() and task.exception() is None:
                _inject(agent, task.result().merged.contexts, event)

    # -- Stop ------------------------------------------------------------------------------
    def turn_end(self, item: TurnEnded) -> None:
        agent, result = item
        if agent.depth != 0 or result.stop_reason == "aborted":
            return  # subagents have SubagentStop; a user interrupt runs no Stop hook
        active = agent.id in self._continued
        self._continued.discard(agent.id)
        self.service.spawn(self._stop(agent, active, result.output), "Stop")

    async def _stop(self, agent: Agent, active: bool, output: str) -> None:
        run = await self.service.dispatch(
            HookEvent.STOP,
            {"stop_hook_active": active},
            session=_session_of(agent),
            background=True,
            codex_fields={"last_assistant_message": output or None},
        )
        if run.merged.decision != "block" or agent.closing:
            return  # an agent being torn down records notices but is not woken
        self._continued.add(agent.id)
        agent.followup(run.merged.reason or "continue", source=context_source(HookEvent.STOP))

    # -- SubagentStart / SubagentStop ------------------------------------------------------
    def subagent_start(self, item: SubagentLifecycle | tuple[object, object, object]) -> None:
        parent, child_id, agent_type = self._lifecycle(item)
        fields: dict[str, JsonValue] = {"agent_id": child_id, "agent_type": agent_type}
        self._hold(
            child_id,
            HookEvent.SUBAGENT_START,
            self.service.dispatch(
                HookEvent.SUBAGENT_START,
                fields,
                session=_session_of(parent),
                subject=agent_type,
                background=True,
            ),
        )

    def subagent_end(self, item: SubagentLifecycle | tuple[object, object, object]) -> None:
        parent, child_id, agent_type = self._lifecycle(item)
        self._pending.pop(child_id, None)  # a child that never stepped has no use for them
        fields: dict[str, JsonValue] = {
            "stop_hook_active": False,
            "agent_id": child_id,
            "agent_type": agent_type,
            "agent_transcript_path": self.service.transcript_path_of(child_id),
        }
        self.service.spawn(
            self.service.dispatch(
                HookEvent.SUBAGENT_STOP,
                fields,
                session=_session_of(parent),
                subject=agent_type,
                background=True,
            ),
            HookEvent.SUBAGENT_STOP.value,
        )

    def _lifecycle(
        self, item: SubagentLifecycle | tuple[object, object, object]
    ) -> tuple[object, str, str]:
        """``(parent, child id, agent type)`` of a ``subagent/start``/``subagent/end`` payload:
        a :class:`~tether.subagents._lifecycle.SubagentLifecycle`, or a ``(parent, child agent
        or id, description)`` tuple (a plugin's own notification)."""
        if isinstance(item, tuple):
            parent, child, description = item
            return parent, _agent_id(child), _agent_type(child, description)
        return item.parent, item.child_id, item.label or item.provider


def _workspace_root(ctx: Context) -> str | None:
    service = ctx.get(SANDBOX_POLICY_SERVICE)
    root = service.workspace_root if service is not None else None
    return root if isinstance(root, str) and root else None


def _session_of(agent: object) -> Session | None:
    session = getattr(agent, "session", None)
    return session if isinstance(session, Session) else None


def _inject(agent: object, contexts: Sequence[str], event: HookEvent) -> None:
    inject = getattr(agent, "inject", None)
    if not callable(inject):
        return
    for text in contexts:
        inject(text, source=context_source(event))


def _user_prompt(prompt: object) -> str | None:
    """The text of a turn's prompt if a user typed it (plugin followups are not prompts)."""
    if isinstance(prompt, str):
        return prompt
    content = getattr(prompt, "content", None)
    source = getattr(prompt, "source", None) or {}
    if isinstance(content, str) and source.get("kind", "user") == "user":
        return content
    return None


def _agent_id(child: object) -> str:
    ident = getattr(child, "id", None)
    return ident if isinstance(ident, str) else str(child)


def _agent_type(child: object, description: object) -> str:
    label = getattr(getattr(child, "options", None), "label", None)
    if isinstance(label, str) and label:
        return label
    return description if isinstance(description, str) else ""


class HooksPlugin:
    """Loads the handlers, provides service ``hooks``, and listens only where a handler is
    configured (no handler, no per-call cost)."""

    name = "hooks"
    requires: tuple[AnyServiceKey, ...] = ()
    config_model = HooksConfig

    def workspace_files(self, config: HooksConfig, workspace: str) -> list[str]:
        """The settings and Codex files (workspace trust reads and checks them before the
        load)."""
        base = config.project_dir or workspace
        return settings_paths([*config.settings_files, *config.codex_files], base)

    def apply(self, ctx: Context, config: HooksConfig) -> None:
        # Relative settings files belong to the project: the workspace the sandbox policy was
        # composed with (``tether run --workspace``), unless configured otherwise.
        project_dir = config.project_dir or _workspace_root(ctx) or os.getcwd()
        files = ctx.get(WORKSPACE_FILES)
        try:
            handlers = load_handlers(
                config, project_dir, files if isinstance(files, WorkspaceFiles) else None
            )
        except HookSettingsError as err:
            raise PluginConfigError(f"plugin 'hooks': {err}") from err
        service = HookService(
            ctx,
            handlers,
            HookSettings(
                default_timeout=config.default_timeout,
                pass_env=tuple(config.pass_env),
                fail_closed=config.fail_closed,
                project_dir=project_dir,
            ),
        )
        tools = ctx.get(TOOLS_SERVICE)
        report_unknown_tool_matchers(handlers, tools.names() if tools is not None else ())
        bridge = HookBridge(service)
        ctx.provide(HOOKS_SERVICE, service)
        ctx.effect(service.close)
        ctx.on(PENDING_WORK, lambda _: service.settle())  # a Stop hook may queue a turn
        if service.has(HookEvent.PRE_TOOL_USE):
            ctx.on(PRE_EXECUTE, bridge.pre_execute)
        if service.has(HookEvent.POST_TOOL_USE):
            ctx.on(POST_EXECUTE, bridge.post_execute)
        if service.has(HookEvent.USER_PROMPT_SUBMIT):
            ctx.on(PRE_TURN, bridge.pre_turn)
        if any(
            service.has(e)
            for e in (
                HookEvent.USER_PROMPT_SUBMIT,
                HookEvent.SESSION_START,
                HookEvent.SUBAGENT_START,
            )
        ):
            ctx.on(PRE_STEP, bridge.pre_step)
        if service.has(HookEvent.STOP):
            ctx.on(TURN_END, bridge.turn_end)
        if service.has(HookEvent.SUBAGENT_START):
            ctx.on(SUBAGENT_START, bridge.subagent_start)
        if service.has(HookEvent.SUBAGENT_STOP):
            ctx.on(SUBAGENT_END, bridge.subagent_end)
        sessions = ctx.get(SESSIONS_SERVICE)
        if service.has(HookEvent.SESSION_START):
            ctx.on(SESSION_START, bridge.agent_session_start)
            if sessions is not None:
                ctx.effect(sessions.on_created(bridge.session_created))
        if sessions is not None:
            ctx.effect(sessions.on_disposed(bridge.session_disposed))


plugin: Final = HooksPlugin()

__all__ = ["HookBridge", "HooksConfig", "HooksPlugin", "load_handlers", "plugin"]
