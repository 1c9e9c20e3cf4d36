"""The agent: an inbox, a driver that runs turns and steps, and cancellation.

A turn is one claimed prompt (or a batch of steers) driven to a stop: each step claims waiting
input, appends the runtime-context snapshot if it changed, logs the request header if it
changed, compacts the conversation first when the request would near the model's context
window (:mod:`tether.agent._compaction`), makes one model request, and executes the requested
tool calls in order. The turn
ends with one of the stop reasons below, recorded as ``turn/end``.

The agent id is its session id.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, NamedTuple

from tether._signals import AbortedError, AbortSignal
from tether.agent._compaction import (
    CompactionError,
    Summariser,
    compact,
    compact_threshold,
    estimate_tokens,
    overflow,
)
from tether.agent._context_snapshot import (
    append_header_if_changed,
    append_snapshot_if_changed,
    render_system,
)
from tether.agent._events import (
    AssistantMessage,
    InboxTarget,
    RequestHeader,
    StepClosed,
    StepOpened,
    StopReason,
    ToolCalled,
    ToolResulted,
    TurnClosed,
    TurnOpened,
    UserMessage,
)
from tether.agent._history import Conversation
from tether.agent._inbox import USER_SOURCE, Inbox, InboxItem
from tether.agent._instructions import PROJECT_INSTRUCTIONS
from tether.agent._tool_schemas import advertised
from tether.kernel import Context, Gather, Notice, Waterfall
from tether.model import (
    Completion,
    Message,
    ModelClient,
    ModelError,
    ModelRequest,
    TextDelta,
    ToolSchema,
)
from tether.model._context_window import context_window_of
from tether.session import Event, JsonValue, Session
from tether.session._json import PayloadError
from tether.tools._pipeline import ToolRuntime

log = logging.getLogger(__name__)

"""How a turn ended.

- ``completed``: the model answered without further tool calls.
- ``aborted``: the turn was cancelled (``cause`` says by whom: user, parent, hook, disposed).
- ``error``: the model or the harness failed; ``error`` carries the message (``CODE: ...``;
  ``CONTEXT_OVERFLOW`` when the next request would not fit the context window).
- ``max-tokens``: the model's reply was cut off by its output limit.
- ``max-steps``: the turn used all the steps :attr:`AgentOptions.max_steps` allows.
- ``blocked``: a pre-step gate refused to continue.
"""

DEFAULT_MAX_STEPS: Final = 50


def max_steps_detail(limit: int) -> str:
    return (
        f"the turn reached its limit of {limit} steps and stopped before step {limit + 1} "
        "(raise it with --max-steps, or max_steps in tether.toml)"
    )


def max_turns_detail(limit: int, dropped: int) -> str:
    queued = "1 queued input was" if dropped == 1 else f"{dropped} queued inputs were"
    return (
        f"the run reached its limit of {limit} turns; {queued} not run (raise it with "
        "--max-turns, or max_turns in tether.toml)"
    )


CancelCause = Literal["user", "parent", "hook", "disposed"]
"""Who cancelled: the user, the delegating parent, a hook, or teardown."""

AgentStatus = Literal["idle", "running"]


@dataclass(frozen=True, slots=True)
class AgentOptions:
    model: ModelClient
    label: str | None = None
    max_steps: int = DEFAULT_MAX_STEPS
    """Steps one turn may take (one model request each) before it ends ``max-steps``."""
    allowed_tools: frozenset[str] | None = None
    """Tool filter: removes tools from the prompt and from execution together."""
    context_window: int | None = None
    """The model's context window in tokens; ``None``: the model client's own, if it has one
    (:func:`~tether.model.context_window_of`). Without any the agent never compacts by
    itself."""


@dataclass(frozen=True, slots=True)
class TurnResult:
    turn: int
    stop_reason: StopReason
    output: str
    error: str | None = None
    cause: CancelCause | None = None


@dataclass(slots=True)
class _TurnState:
    signal: AbortSignal = field(default_factory=AbortSignal)
    cause: CancelCause | None = None


class PreStep:
    """Payload of the ``agent/pre-step`` waterfall: listeners return "enter" or "reject".

    ``prompt`` is the turn's claimed prompt at step 1 (``None`` afterwards, or for a turn
    started by steers).
    """

    __slots__ = ("agent", "prompt", "step", "turn")

    def __init__(self, agent: Agent, turn: int, step: int, prompt: InboxItem | None = None) -> None:
        self.agent = agent
        self.turn = turn
        self.step = step
        self.prompt = prompt


@dataclass(frozen=True, slots=True)
class PreTurn:
    """Payload of the ``agent/pre-turn`` waterfall: a prompt about to open a turn."""

    agent: Agent
    prompt: InboxItem


@dataclass(frozen=True, slots=True)
class TurnRejected:
    """A ``agent/pre-turn`` listener's refusal: no turn opens and nothing is logged."""

    reason: str


class Agent:
    def __init__(
        self,
        ctx: Context,
        session: Session,
        options: AgentOptions,
        *,
        tools: ToolRuntime | None = None,
    ) -> None:
        self.ctx = ctx
        self.session = session
        self.options = options
        self.tools = tools
        self.inbox = Inbox(session)
        self.last_result: TurnResult | None = None
        self.closing = False
        """Set when the agent's owner is tearing down: notices are recorded, not woken on."""
        self.scope_ctx: Context | None = None
        """Registrations scoped to this agent (a child's composition); disposed with it."""
        self._driver: asyncio.Task[None] | None = None
        self._turn: _TurnState | None = None
        self._cancel_before_turn = False
        self._results: list[TurnResult] = []
        self._owner: Agent | None = None
        self._turns_left: int | None = None
        self._turn_limit: int | None = None
        self._log_writer = asyncio.Lock()
        """Held by a turn and by :meth:`compact`: one of them appends at a time."""
        self.turn_limit_reached: str | None = None
        """Why the driver stopped short of queued work (:meth:`limit_turns`), else ``None``."""
        self._resuming = bool(session.header.seed_length) or (
            session.last(RequestHeader.TYPE) is not None
        )
        """The log was begun elsewhere (a seed, an earlier process): the first request logs
        ``request/header {reason: "resume"}``."""

    @property
    def id(self) -> str:
        return self.session.id

    @property
    def depth(self) -> int:
        return self.session.header.delegation_depth

    @property
    def status(self) -> AgentStatus:
        return "running" if self._driver is not None and not self._driver.done() else "idle"

    @property
    def owner(self) -> Agent | None:
        """The agent that drives this one (a one-shot child's parent), or ``None``: process-
        local ownership, set while the agent is in the ``agents`` registry
        (:meth:`~tether.agent._registry.AgentRegistry.register`)."""
        return self._owner

    def __repr__(self) -> str:
        return f"Agent({self.id!r}, {self.status})"

    # -- input -------------------------------------------------------------------------------
    def send(
        self,
        content: str,
        target: InboxTarget,
        *,
        source: Mapping[str, JsonValue] | None = None,
        wake: bool = True,
    ) -> None:
        self.inbox.put(target, InboxItem(content, dict(source or USER_SOURCE)))
        if wake and target != "inject":
            self._wake()

    def followup(self, content: str, *, source: Mapping[str, JsonValue] | None = None) -> None:
        self.send(content, "next-turn", source=source)

    def steer(self, content: str, *, source: Mapping[str, JsonValue] | None = None) -> None:
        self.send(content, "next-step", source=source)

    def inject(self, content: str, *, source: Mapping[str, JsonValue] | None = None) -> None:
        self.send(content, "inject", source=source, wake=False)

    async def run(
        self, prompt: str, *, source: Mapping[str, JsonValue] | None = None
    ) -> TurnResult:
        """Queue ``prompt`` as a followup and wait for the agent to go idle."""
        before = len(self._results)
        self.followup(prompt, source=source)
        await self.when_idle()
        if len(self._results) <= before:
            raise RuntimeError("the agent went idle without running the turn")
        return self._results[before]

    # -- control -----------------------------------------------------------------------------
    def cancel(self, cause: CancelCause = "user", *, keep_inbox: bool = False) -> None:
        """Abort the running turn. Without ``keep_inbox`` unclaimed input is discarded."""
        if not keep_inbox:
            self.inbox.clear()
        if self._turn is not None and not self._turn.signal.aborted:
            self._turn.cause = cause
            self._turn.signal.abort(cause)
        elif self._turn is None and self.status == "running":
            # Woken but no turn begun yet: the driver must not start one (queued work stays
            # parked when ``keep_inbox``; a later wake runs it).
            self._cancel_before_turn = True

    def limit_turns(self, limit: int | None) -> None:
        """Start one run's budget: at most ``limit`` more turns (``None``: no limit). Input
        still queued past it is discarded and :attr:`turn_limit_reached` says so."""
        self._turns_left = self._turn_limit = limit
        self.turn_limit_reached = None

    def lift_turn_limit(self) -> None:
        """End the run's budget; :attr:`turn_limit_reached` stays for the caller to read."""
        self._turns_left = self._turn_limit = None

    async def when_idle(self) -> None:
        while self._driver is not None and not self._driver.done():
            await asyncio.shield(self._driver)

    def _wake(self) -> None:
        if self._driver is None or self._driver.done():
            # Owned by the runtime: a kernel that closes cancels and awaits a running driver.
            self._driver = self.ctx.spawn(self._drive(), name=f"agent {self.id}")

    # -- driver ------------------------------------------------------------------------------
    async def _drive(self) -> None:
        while self.inbox.has_work():
            if self._cancel_before_turn:
                self._cancel_before_turn = False
                return
            if self._turns_left is not None:
                if self._turns_left <= 0:
                    self._stop_at_turn_limit()
                    return
                self._turns_left -= 1
            async with self._log_writer:
                prompt = self.inbox.take_turn_prompt()
                rejected = await self._rejected(prompt)
                result = rejected or await self._run_turn(prompt)
            self.last_result = result
            self._results.append(result)
            if rejected is None:
                self.ctx.emit(TURN_END, TurnEnded(self, result))

    async def _rejected(self, prompt: InboxItem | None) -> TurnResult | None:
        """The result of a prompt a ``agent/pre-turn`` listener refused, before any turn."""
        if prompt is None:
            return None
        refusal = await self.ctx.waterfall(PRE_TURN, PreTurn(self, prompt), None, scope=self)
        if refusal is None:
            return None
        return TurnResult(self._next_turn_number(), "blocked", "", refusal.reason)

    def _stop_at_turn_limit(self) -> None:
        dropped = self.inbox.pending("next-turn") + self.inbox.pending("next-step")
        self.inbox.clear()
        self.turn_limit_reached = max_turns_detail(self._turn_limit or 0, dropped)

    def _first_own_turn(self) -> bool:
        """No turn of this session's own has started yet (a fork seed's turns are not)."""
        last = self.session.last(TurnOpened.TYPE)
        return last is None or last.seq < (self.session.header.seed_length or 0)

    def _append_instructions(self) -> None:
        """The project instructions, once, at the start of the session's first own turn."""
        source = self.ctx.get(PROJECT_INSTRUCTIONS)
        if source is not None:
            # Read in place, not in a worker thread: a few small files once per session, and
            # the first step must not yield to other agents where it never did (their order is
            # the log's order).
            source.give(self.session)

    def _next_turn_number(self) -> int:
        last = self.session.last(TurnOpened.TYPE)
        if last is None:
            return 1
        started = TurnOpened.parse(last.data)
        return (started.turn if started is not None else 0) + 1

    async def _run_turn(self, prompt: InboxItem | None) -> TurnResult:
        turn = self._next_turn_number()
        first_own_turn = self._first_own_turn()
        state = _TurnState()
        self._turn = state
        self.session.append(TurnOpened.TYPE, TurnOpened(turn).to_data())
        output = ""
        reason: StopReason = "completed"
        error: str | None = None
        detail: str | None = None
        step = 0
        try:
            while True:
                if step >= self.options.max_steps:
                    reason, detail = "max-steps", max_steps_detail(self.options.max_steps)
                    break
                decision = await self.ctx.waterfall(
                    PRE_STEP,
                    PreStep(self, turn, step + 1, prompt if step == 0 else None),
                    "enter",
                    scope=self,
                )
                if decision != "enter":
                    reason, detail = "blocked", f"a pre-step gate returned {decision!r}"
                    break
                step += 1
                self.session.append(StepOpened.TYPE, StepOpened(step).to_data())
                if step == 1 and first_own_turn:
                    self._append_instructions()
                claimed = [prompt] if prompt is not None and step == 1 else []
                claimed += self.inbox.take_step_items()
                for item in claimed:
                    claim = UserMessage(item.content, item.source)
                    self.session.append(claim.TYPE, claim.to_data(), surface_op="append")
                completion = await self._request(state.signal)
                output = completion.text
                self._append_reply(completion)
                for call in completion.tool_calls:
                    await self._call_tool(call.id, call.name, call.arguments, state.signal)
                self.session.append(StepClosed.TYPE, StepClosed(step).to_data())
                if state.signal.aborted:
                    raise AbortedError(state.cause)
                if completion.tool_calls or self.inbox.pending("next-step"):
                    continue
                if completion.finish_reason == "length":
                    reason = "max-tokens"
                break
        except AbortedError:
            reason = "aborted"
            self._close_step(step)
        except (ModelError, PayloadError, CompactionError) as err:
            # Expected failures with a stable code: said in the turn's end, no traceback.
            reason, error = "error", f"{err.code}: {err}"
            self._close_step(step)
        except Exception as err:
            log.exception("agent %s: turn %d failed", self.id, turn)
            reason, error = "error", f"{type(err).__name__}: {err}"
            self._close_step(step)
        finally:
            self._turn = None
        cause = (state.cause or "user") if reason == "aborted" else None
        end = TurnClosed(turn, reason, cause, error, detail)
        self.session.append(end.TYPE, end.to_data())
        return TurnResult(turn, reason, output, error or detail, state.cause)

    def _close_step(self, step: int) -> None:
        last_start, last_end = (
            self.session.last(StepOpened.TYPE),
            self.session.last(StepClosed.TYPE),
        )
        if step and last_start is not None and (last_end is None or last_end.seq < last_start.seq):
            self.session.append(StepClosed.TYPE, StepClosed(step, "interrupted").to_data())

    def _tool_schemas(self) -> Sequence[ToolSchema]:
        if self.tools is None:
            return ()
        return advertised(self.tools.schemas(self.options.allowed_tools, self))

    @property
    def context_window(self) -> int | None:
        return self.options.context_window or context_window_of(self.options.model)

    def _summariser(self, system: str, schemas: Sequence[ToolSchema]) -> Summariser:
        return Summariser(
            self.session,
            self.options.model,
            self.options.label,
            system,
            schemas,
            self.context_window,
        )

    async def compact(self) -> Event:
        """Summarise the conversation so far into one ``context/compacted`` event, between
        turns (``/compact``). Raises :class:`~tether.agent._compaction.CompactionError`:
        ``COMPACTION_BUSY`` while a turn runs, ``NOTHING_TO_COMPACT``, ``COMPACTION_FAILED``."""
        if self.status == "running" or self._log_writer.locked():
            raise CompactionError(
                f"agent {self.id} is running a turn; compact between turns (or cancel the turn "
                "first)",
                code="COMPACTION_BUSY",
            )
        async with self._log_writer:
            system, _ = render_system(self.ctx.runtime.prompt, self)
            return await compact(self._summariser(system, self._tool_schemas()), "manual")

    async def _fit(self, system: str, schemas: Sequence[ToolSchema], signal: AbortSignal) -> None:
        """Compact before a request that would reach :data:`COMPACT_AT` of the window; fail
        the turn (``CONTEXT_OVERFLOW``) only when the request still would not fit."""
        window = self.context_window
        if window is None:
            return
        tokens = estimate_tokens(self.session.fold(Conversation), system, schemas)
        if tokens < compact_threshold(window):
            return
        turn = self.session.last(TurnOpened.TYPE)
        try:
            await compact(
                self._summariser(system, schemas),
                "auto",
                turn_start=turn.seq if turn is not None else None,
                signal=signal,
            )
        except CompactionError as err:
            if tokens >= window:
                raise overflow(
                    tokens, window, f"compaction did not help ({err.code}: {err})"
                ) from err
            return
        after = estimate_tokens(self.session.fold(Conversation), system, schemas)
        if after >= window:
            raise overflow(after, window, "compaction did not shrink it enough")

    async def _request(self, signal: AbortSignal) -> Completion:
        registry = self.ctx.runtime.prompt
        append_snapshot_if_changed(self.session, registry, self)
        system, _ = render_system(registry, self)
        schemas = self._tool_schemas()
        append_header_if_changed(
            self.session, system, [s.name for s in schemas], resuming=self._resuming
        )
        self._resuming = False
        await self._fit(system, schemas, signal)
        # The session's fold of its log: this request reads only the events appended since
        # the one before (docs/compaction.md, "The history").
        conversation = self.session.fold(Conversation)
        messages = conversation.messages()
        if system:
            messages.insert(0, Message.system(system))
        request = ModelRequest(
            messages=messages,
            tools=schemas,
            session_id=self.id,
            depth=self.depth,
            label=self.options.label,
            step_index=conversation.replies_since(self.session.header.seed_length or 0),
        )
        final: Completion | None = None
        stream = self.options.model.stream(request, signal)
        try:
            async for item in stream:
                if isinstance(item, Completion):
                    final = item
                elif isinstance(item, TextDelta):
                    self.ctx.emit(TEXT_DELTA, StreamedText(self, item.text), scope=self)
        finally:
            await stream.aclose()  # type: ignore[attr-defined]
        if signal.aborted:
            raise AbortedError(signal.reason)
        if final is None:
            raise ModelError(
                "the model stream ended without a completion", code="MODEL_BAD_RESPONSE"
            )
        return final

    def _append_reply(self, completion: Completion) -> None:
        reply = AssistantMessage(
            completion.text,
            completion.finish_reason,
            completion.usage,
            completion.reasoning,  # empty too: DeepSeek wants it back (model/)
            completion.tool_calls,
        )
        self.session.append(reply.TYPE, reply.to_data(), surface_op="append")

    async def _call_tool(
        self, call_id: str, name: str, arguments: str, signal: AbortSignal
    ) -> None:
        self.session.append(ToolCalled.TYPE, ToolCalled(call_id, name, arguments).to_data())
        if self.tools is None:
            content, is_error = f'Error: unknown tool "{name}"', True
        else:
            result = await self.tools.execute(
                self, call_id, name, arguments, signal, allowed=self.options.allowed_tools
            )
            content, is_error = result.content, result.is_error
        try:
            self._append_result(call_id, name, content, is_error)
        except PayloadError as err:
            # Tool output the log cannot store (text that is not valid Unicode, say) must not
            # end the turn: the model is told why it got no result instead.
            self._append_result(call_id, name, unstorable_result(name, err), True)

    def _append_result(self, call_id: str, name: str, content: str, is_error: bool) -> None:
        result = ToolResulted(call_id, name, content, is_error)
        self.session.append(result.TYPE, result.to_data(), surface_op="append")


def unstorable_result(name: str, err: PayloadError) -> str:
    """The error result that stands in for a tool result the log cannot store."""
    return (
        f'Error: the result of tool "{name}" could not be recorded ({err}), so it was '
        "dropped; try the call another way (a narrower path or pattern, say)"
    )


# -- the loop's points ---------------------------------------------------------------------
# The points of an agent's loop, beside the loop (another layer listens to them by these keys):
#
# - :data:`PRE_STEP`, a waterfall scoped to the agent, runs before every step: ``"enter"`` lets
#   the step run, anything else ends the turn ``blocked``.
# - :data:`PRE_TURN`, a waterfall scoped to the agent, runs before a prompt opens a turn:
#   ``None`` lets it, a :class:`TurnRejected` drops the prompt with no turn in the log (the
#   result is ``blocked`` with its reason; no ``agent/turn-end`` follows).
# - :data:`TEXT_DELTA`, scoped to the agent, carries each piece of streamed model text.
# - :data:`TURN_END` follows every turn, with its result.
# - :data:`SESSION_START` is for a surface that brings in a root session some other way than
#   the store creating it (the hooks plugin runs ``SessionStart`` for it).
# - :data:`PENDING_WORK` is gathered by whoever waits for a composition to go quiet: each
#   listener returns an awaitable that finishes once the work it may still queue on an agent
#   (a ``Stop`` hook's continuation) is queued or dropped.

PreStepDecision = Literal["enter", "reject"]
"""What a ``agent/pre-step`` listener answers."""


class StreamedText(NamedTuple):
    """Payload of ``agent/text-delta``."""

    agent: Agent
    text: str


class TurnEnded(NamedTuple):
    """Payload of ``agent/turn-end``."""

    agent: Agent
    result: TurnResult


PRE_STEP: Final[Waterfall[PreStep, PreStepDecision]] = Waterfall("agent/pre-step")
PRE_TURN: Final[Waterfall[PreTurn, TurnRejected | None]] = Waterfall("agent/pre-turn")
TEXT_DELTA: Final = Notice[StreamedText]("agent/text-delta")
TURN_END: Final = Notice[TurnEnded]("agent/turn-end")
SESSION_START: Final[Notice[Agent]] = Notice("agent/session-start")
PENDING_WORK: Final = Gather[None, Awaitable[None]]("agent/pending-work")
