"""The approval service: the one home of the ``request()`` algorithm every ask goes through.

Order matters and is fixed here:

1. refuse outside an open turn (nothing is appended: the audit pair must be turn-enclosed);
2. append ``approval/asked {id, tool_name, call_id?, reason?, routed_to?, action?}``, where
   ``action`` is the :class:`AskedAction` (what would run, exact) every surface shows, when it
   names a command, a path or an escalation's target mode;
3. decide: the permission rules and grants first (``policy/_permissions.py``): a ``deny``
   rule rejects, a session grant or an ``allow`` rule allows once (``decided_by``), an ``ask``
   rule leaves it to the answerers; then a pre-aborted signal is ``cancelled`` and no answerer
   runs; an effective policy of ``never`` is ``rejected`` *before* dispatch, so no answerer
   (not even a prepended one) can bypass it; otherwise the ``approval/request`` waterfall
   (scoped to the asking agent, fallback ``unavailable``), offered the grants it may make
   (:class:`GrantChoices`), raced against the signal and the per-request timeout, where a
   raising answerer, a non-vocabulary reply, a grant that was not offered and a timeout are
   all ``unavailable``;
4. append ``approval/decided {id, outcome, ...}`` (and, for an answer that grants,
   ``approval/grant`` on the deciding session's log) and flush it durably before returning,
   so an approved action never runs ahead of its audit record (``docs/design.md`` §2,
   principle 5).

:meth:`ApprovalService.screen` applies the rules to a tool call that may not ask at all: a
``deny`` rule refuses it (with the same audit pair), an ``ask`` rule makes it ask.

Answerers register on the ``approval/request`` waterfall (see :func:`register_answerer`). The
convention is one terminal answerer per deployment; an answerer that does not own the agent
calls ``next()``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
import uuid
from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import KW_ONLY, dataclass, replace
from typing import Final, Literal, NamedTuple, TypeAlias, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from tether._signals import AbortedError, AbortSignal, race
from tether.kernel import (
    SESSIONS_SERVICE,
    AnyServiceKey,
    Context,
    Disposable,
    Notice,
    ServiceKey,
    Waterfall,
    WaterfallListener,
)
from tether.kernel._printable import printable
from tether.kernel._real_path import real_path
from tether.policy._errors import (
    ApprovalOutsideTurnError,
    InvalidPolicyConfigError,
    InvalidPolicyError,
    InvalidSourceError,
    RuleStoreError,
)
from tether.policy._events import (
    EXCERPT_CHARS,
    AnswererFailure,
    ApprovalAsked,
    ApprovalDecided,
    ApprovalGranted,
    ApprovalPendingClosed,
    ApprovalPendingOpened,
    ApprovalPolicySet,
    DecidedBy,
    GrantScope,
    RuleCited,
    ScopeKind,
)
from tether.policy._grants import scope_offers
from tether.policy._modes import (
    GRANTING,
    ApprovalOutcome,
    ApprovalPolicy,
    PolicySource,
    SandboxMode,
    as_outcome,
    parse_approval_policy,
    parse_policy_source,
)
from tether.policy._permissions import (
    NO_VERDICT,
    PERMISSION_RULES,
    Verdict,
    binding_rules,
    call_facts,
    cite,
    is_child,
    verdict,
)
from tether.policy._protocols import HasSession
from tether.policy._rules import PermissionRule
from tether.policy._sandbox_policy import SANDBOX_POLICY_SERVICE
from tether.session import Event, JsonValue, Session

log = logging.getLogger(__name__)
T = TypeVar("T")

APPROVAL_CONTEXT_NAME: Final = "approval:policy"
APPROVAL_CONTEXT_ORDER: Final = 115
NOTICE_SOURCE: Final[Mapping[str, JsonValue]] = {"kind": "plugin", "plugin": "approval"}

NEVER_TEXT: Final = (
    "Approval prompts are disabled in this session. Actions that need approval are rejected "
    "automatically, so do not request sandbox escalation (do not set `sandbox_permissions`)."
)
ASK_TEXT: Final = (
    "Approval policy: ask. Operations that need approval may ask through the configured "
    "answerers; without one, the request fails closed."
)


@dataclass(frozen=True, eq=False, slots=True)
class ApprovalRequest:
    """One ask. Identity-compared: two requests are never the same ask."""

    agent: HasSession
    tool_name: str
    _: KW_ONLY
    call_id: str | None = None
    """Answerers correlate with the tool call through this id."""
    reason: str | None = None
    signal: AbortSignal | None = None
    action: Mapping[str, JsonValue] | None = None
    """What tether knows of the action (command, path, ...) for answerers to show. Its
    ``command`` and ``path`` are logged in ``approval/asked {action}`` (:class:`AskedAction`)."""
    origin: RoutedOrigin | None = None
    """Set when a subagent's question is routed to ``agent`` (its root): who really asks."""
    target_mode: SandboxMode | None = None
    """The wider mode a sandbox escalation asks for, for this one call; set by the escalation
    ladder from the mode it validated, never read from the model's arguments (``None``: the
    ask is not an escalation)."""
    choices: GrantChoices | None = None
    """The grants an answer may make (``None``: only ``allowed-once``); set by the approval
    service before the answerers run, never by the asker."""

    def outcomes(self) -> tuple[ApprovalOutcome, ...]:
        """The outcomes an answer may give, as offered: those that allow (:attr:`choices`),
        then ``rejected``."""
        choices = self.choices
        allowing = choices.outcomes() if choices is not None else (ApprovalOutcome.ALLOWED_ONCE,)
        return (*allowing, ApprovalOutcome.REJECTED)


@dataclass(frozen=True, slots=True)
class GrantChoices:
    """What an answerer may grant besides ``allowed-once``: ``allowed-for-session`` with one
    of ``scopes`` (narrowest first, the default), and ``allowed-always`` too when ``always``
    (the user's rules file can keep it; otherwise ``always_refused`` says why not)."""

    scopes: tuple[GrantScope, ...]
    always: bool
    always_refused: str | None = None

    def outcomes(self) -> tuple[ApprovalOutcome, ...]:
        """The outcomes that allow, as an answerer may give them."""
        wider = (ApprovalOutcome.ALLOWED_FOR_SESSION,) if self.scopes else ()
        always = (ApprovalOutcome.ALLOWED_ALWAYS,) if self.scopes and self.always else ()
        return (ApprovalOutcome.ALLOWED_ONCE, *wider, *always)

    def pick(self, wanted: GrantScope | ScopeKind | None) -> GrantScope | None:
        """The offered scope ``wanted`` names: the first offer of a kind, or the offer with
        that kind and rule (a target mode, when it names one, must be the offer's); ``None``
        picks the narrowest. A scope that was not offered gives ``None``: it is refused,
        never narrowed."""
        if not self.scopes:
            return None
        if wanted is None:
            return self.scopes[0]
        for scope in self.scopes:
            if isinstance(wanted, GrantScope):
                if (scope.kind, scope.rule) == (wanted.kind, wanted.rule) and (
                    wanted.target_mode in (None, scope.target_mode)
                ):
                    return scope
            elif scope.kind == wanted:
                return scope
        return None


@dataclass(frozen=True, slots=True)
class AskedAction:
    """What an ask would let run, recorded as ``approval/asked {action}`` so every surface that
    shows a pending ask (a prompt, ``tether approvals list``, the wait hint) can show it exact
    and in full: ``{tool, command?, path?, target_mode?}``."""

    tool: str
    command: str | None = None
    path: str | None = None
    target_mode: SandboxMode | None = None

    @classmethod
    def of(cls, req: ApprovalRequest) -> AskedAction:
        action = req.action or {}
        command, path = action.get("command"), action.get("path")
        return cls(
            req.tool_name,
            command if isinstance(command, str) else None,
            path if isinstance(path, str) else None,
            req.target_mode,
        )

    @classmethod
    def from_data(cls, action: JsonValue, tool_name: str) -> AskedAction:
        """The action stored in an ``approval/asked`` event (its ``action`` and ``tool_name``).
        An event written before the field existed gives the tool name alone; a value of the
        wrong shape is left out, never guessed."""
        fields: Mapping[str, JsonValue] = action if isinstance(action, Mapping) else {}
        tool = fields.get("tool")
        command, path, mode = fields.get("command"), fields.get("path"), fields.get("target_mode")
        return cls(
            tool if isinstance(tool, str) else tool_name,
            command if isinstance(command, str) else None,
            path if isinstance(path, str) else None,
            next((m for m in SandboxMode if m.value == mode), None),
        )

    def names_anything(self) -> bool:
        """Whether the action says more than its tool (``approval/asked`` has the tool name
        already; an ask naming nothing more is logged without ``action``)."""
        return self.command is not None or self.path is not None or self.target_mode is not None

    def to_data(self) -> dict[str, JsonValue]:
        data: dict[str, JsonValue] = {"tool": self.tool}
        if self.command is not None:
            data["command"] = self.command
        if self.path is not None:
            data["path"] = self.path
        if self.target_mode is not None:
            data["target_mode"] = self.target_mode.value
        return data


@dataclass(frozen=True, slots=True)
class Answer:
    """An answerer's outcome together with who gave it (recorded as ``answered_by``) and, for
    an outcome that grants, the scope it chose among the request's :class:`GrantChoices` (a
    kind, or the offered scope itself; ``None``: the narrowest)."""

    outcome: str
    by: str | None = None
    scope: GrantScope | ScopeKind | None = None


@dataclass(frozen=True, eq=False, slots=True)
class RoutedOrigin:
    """The asking subagent of a routed request (docs/decisions/0016).

    The audit pair is written on the asking child's log (its turn is open: it is executing the
    call); the root's log gets ``approval/pending`` records, which need no open turn, so the
    question reaches the root's answerers whether the root is mid-turn or idle.
    """

    child: HasSession
    call_id: str | None
    tool_name: str
    arguments_summary: str
    lineage: tuple[str, ...]
    """Session ids from the asking child up to the root."""

    @property
    def child_session_id(self) -> str:
        return self.child.session.id


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """A routed question waiting for the root's answer (in memory; durable as
    ``approval/pending`` on the root's log)."""

    id: str
    root_session_id: str
    child_session_id: str
    tool_name: str
    headline: str
    lineage: tuple[str, ...]
    since: float
    action: AskedAction | None = None
    """What the question would let run (the ``action`` of its ``approval/asked``)."""


class ApprovalResolved(NamedTuple):
    """Payload of ``approval/resolved``: a routed question and how it was decided."""

    pending: PendingApproval
    outcome: ApprovalOutcome


ApprovalReply: TypeAlias = ApprovalOutcome | Answer | AnswererFailure | str
"""What an answerer returns: an outcome (or its value, as an external answerer gives it), an
:class:`Answer` naming who gave it, or an :class:`AnswererFailure` saying why it could give
none (``unavailable``, with the failure in ``approval/decided``). Anything else counts as
``unavailable``."""


class _Decision(NamedTuple):
    outcome: ApprovalOutcome
    answered_by: str | None = None
    failure: AnswererFailure | None = None
    decided_by: DecidedBy | None = None
    rule: RuleCited | None = None
    grant: str | None = None
    scope: GrantScope | None = None
    rule_id: str | None = None
    """For ``allowed-always``: the rule the user's rules file now holds."""
    rule_error: str | None = None
    """For ``allowed-always``: why the rule could not be kept (it holds for the session)."""


def _require_turn(req: ApprovalRequest, session: Session) -> None:
    if not session.has_open_turn():
        raise ApprovalOutsideTurnError(
            f"approval for tool {req.tool_name!r} requested outside an open turn of session "
            f"{session.id!r}: the approval/asked and approval/decided audit pair must be "
            "enclosed in a turn"
        )


def _asked(
    req: ApprovalRequest, request_id: str, reason: str | None, routed_to: str | None
) -> ApprovalAsked:
    action = AskedAction.of(req)
    return ApprovalAsked(
        request_id,
        req.tool_name,
        req.call_id,
        reason,
        routed_to,
        action.to_data() if action.names_anything() else None,
    )


@dataclass(frozen=True, slots=True)
class Screened:
    """What the permission rules say of a tool call before anything else decides it: refused
    by a ``deny`` rule (its audit pair written and flushed), made to ask by an ``ask`` rule,
    or neither."""

    denied: PermissionRule | None = None
    ask: PermissionRule | None = None


Answerer: TypeAlias = WaterfallListener[ApprovalRequest, ApprovalReply]
"""``fn(request, next)``, sync or async: return an :data:`ApprovalReply` to answer, or
``await next()`` and return that to delegate."""

APPROVAL_SERVICE: Final[ServiceKey[ApprovalService]] = ServiceKey("approval")
APPROVAL_REQUEST: Final = Waterfall[ApprovalRequest, ApprovalReply]("approval/request")
"""The answerers' chain, scoped to the deciding agent (fallback ``unavailable``)."""
APPROVAL_PENDING: Final = Notice[PendingApproval]("approval/pending")
"""A routed question now waits for the root's answer."""
APPROVAL_RESOLVED: Final = Notice[ApprovalResolved]("approval/resolved")
"""A routed question was decided (or closed unanswered)."""


def register_answerer(
    ctx: Context, fn: Answerer, *, scope: object | None = None, prepend: bool = False
) -> Disposable:
    """Listen on ``approval/request``; ``scope`` limits it to one agent's requests.

    Disposing the handle (or the plugin that registered it) removes it, after which asks fail
    closed unless another answerer remains.
    """
    return ctx.on(APPROVAL_REQUEST, fn, scope=scope, prepend=prepend)


def fold_approval_policy(events: Iterable[Event]) -> ApprovalPolicy | None:
    """The policy of the last ``approval/policy`` event, or ``None`` (never the config)."""
    last: Event | None = None
    for event in events:
        if event.type == ApprovalPolicySet.TYPE:
            last = event
    return None if last is None else _policy_of(last)


def _policy_of(event: Event) -> ApprovalPolicy:
    try:
        return ApprovalPolicySet.from_data(event.data).policy
    except (InvalidPolicyError, InvalidSourceError) as err:
        raise type(err)(f"approval/policy event #{event.seq}: {err}") from err


def approval_context_text(policy: ApprovalPolicy) -> str:
    return NEVER_TEXT if policy is ApprovalPolicy.NEVER else ASK_TEXT


def policy_change_notice(old: ApprovalPolicy, new: ApprovalPolicy) -> str:
    return f'The approval policy changed from "{old.value}" to "{new.value}" (changed by the user).'


class ApprovalService:
    """Service ``approval``.

    Durability: the ``approval/decided`` event is flushed through the ``sessions`` service (a
    :class:`~tether.session.SessionStore`) looked up at the moment of use. When no store is
    composed, or the session is not live in it, there is nothing to flush to: such a session is
    in memory only and its audit pair is as durable as the session itself.
    """

    def __init__(
        self,
        ctx: Context,
        policy: ApprovalPolicy | str = ApprovalPolicy.ASK,
        timeout: float | None = None,
    ) -> None:
        self._ctx = ctx
        self.policy = parse_approval_policy(policy)
        if timeout is not None and (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise InvalidPolicyConfigError(
                f"approval timeout must be a positive number of seconds, got {timeout!r}"
            )
        self.timeout = None if timeout is None else float(timeout)
        self._pending: dict[str, PendingApproval] = {}

    # -- policy fold and writes ------------------------------------------------------------
    def override_of(self, session: Session) -> ApprovalPolicy | None:
        """The session's own policy (its last ``approval/policy``), or ``None``."""
        last = session.last(ApprovalPolicySet.TYPE)
        return None if last is None else _policy_of(last)

    def effective_policy(self, session: Session) -> ApprovalPolicy:
        override = self.override_of(session)
        return self.policy if override is None else override

    def set_approval_policy(
        self, session: Session, policy: ApprovalPolicy | str, source: PolicySource | None = None
    ) -> Event:
        """Append one ``approval/policy {policy, source?}``: the only write path."""
        event = ApprovalPolicySet(parse_approval_policy(policy), parse_policy_source(source))
        return session.append(event.TYPE, event.to_data())

    def set_policy(self, agent: HasSession, policy: ApprovalPolicy | str) -> bool:
        """A user's switch: ``False`` (and nothing written) when the effective policy already is
        ``policy``; otherwise append it and queue the change notice for the agent's next step."""
        new = parse_approval_policy(policy)
        session = agent.session
        old = self.effective_policy(session)
        if old is new:
            return False
        self.set_approval_policy(session, new)
        inject = getattr(agent, "inject", None)
        if callable(inject):
            inject(policy_change_notice(old, new), source=NOTICE_SOURCE)
        return True

    def context_text(self, agent: HasSession | None) -> str:
        """The ``approval:policy`` contribution (``""`` when agentless)."""
        if agent is None:
            return ""
        return approval_context_text(self.effective_policy(agent.session))

    # -- the algorithm -------------------------------------------------------------------
    async def request(self, req: ApprovalRequest) -> ApprovalOutcome:
        """Ask; the outcome of :meth:`decide`."""
        return (await self.decide(req)).outcome

    async def decide(self, req: ApprovalRequest) -> ApprovalDecided:
        """Ask, and return the ``approval/decided`` written (with an answerer's ``failure``
        when it gave no outcome); see the module docstring for the exact order. Raises
        :class:`ApprovalOutsideTurnError` (nothing appended) without an open turn, and
        re-raises a failed flush: an outcome is only returned once it is durable.

        A routed request (``req.origin`` set) is decided by ``req.agent`` (the root: its policy
        and its answerers), while the audit pair goes on the asking child's log and the root's
        log records the pending question (docs/decisions/0016).
        """
        decider = req.agent.session
        session = req.origin.child.session if req.origin is not None else decider
        _require_turn(req, session)
        ruled, req = self._permissions(req, session)
        request_id = str(uuid.uuid4())
        routed_to = decider.id if req.origin is not None else None
        asked = _asked(req, request_id, req.reason, routed_to)
        session.append(asked.TYPE, asked.to_data())
        if req.origin is not None and ruled is None:
            try:
                self._open_pending(req, request_id)
                await self._commit(decider)  # where the root's other surfaces can read it
            except BaseException:
                # The question never reached the root durably: close the pair (and the root's
                # pending record) as unavailable, so nobody shows the child blocked forever.
                self._close(req, session, request_id, _Decision(ApprovalOutcome.UNAVAILABLE))
                raise
        try:
            decision = ruled if ruled is not None else await self._decide(req, decider)
            decision = await self._keep_always(req, request_id, decision)
        except asyncio.CancelledError:
            # The asking task itself was cancelled: still close the audit pair, so no live log
            # holds an undecided ask (the write-behind stores it; there is no one to wait).
            self._close(req, session, request_id, _Decision(ApprovalOutcome.CANCELLED))
            raise
        except Exception:
            log.exception("approval: deciding %s failed", req.tool_name)
            decision = _Decision(ApprovalOutcome.UNAVAILABLE)
        decided = self._close(req, session, request_id, decision)
        await self._flush(session)  # the audit pair, and all before it: one durable commit
        if req.origin is not None:
            await self._commit(decider)  # the root's closing record needs no sync
        return decided

    def pending(self) -> list[PendingApproval]:
        """Routed questions waiting for an answer, oldest first."""
        return sorted(self._pending.values(), key=lambda p: p.since)

    def _open_pending(self, req: ApprovalRequest, request_id: str) -> None:
        origin = req.origin
        assert origin is not None
        root = req.agent.session
        opened = ApprovalPendingOpened(
            request_id,
            origin.child_session_id,
            req.tool_name,
            req.reason or "",
            origin.lineage,
            req.call_id,
        )
        root.append(opened.TYPE, opened.to_data())
        entry = PendingApproval(
            request_id,
            root.id,
            origin.child_session_id,
            req.tool_name,
            req.reason or "",
            origin.lineage,
            time.monotonic(),
            AskedAction.of(req),
        )
        self._pending[request_id] = entry
        self._ctx.emit(APPROVAL_PENDING, entry)

    def _close(
        self,
        req: ApprovalRequest,
        session: Session,
        request_id: str,
        decision: _Decision,
    ) -> ApprovalDecided:
        outcome = decision.outcome
        decided = ApprovalDecided(
            request_id,
            outcome,
            decision.answered_by,
            failure=decision.failure,
            decided_by=decision.decided_by,
            rule=decision.rule,
            grant=decision.grant,
            scope=decision.scope,
        )
        session.append(decided.TYPE, decided.to_data())
        if outcome in GRANTING and decision.scope is not None:
            granted = ApprovalGranted(
                str(uuid.uuid4()),
                request_id,
                outcome,
                decision.scope,
                decision.answered_by,
                session.id if req.origin is not None else None,
                decision.rule_id,
                decision.rule_error,
            )
            # The deciding session's log: a routed child's question grants its root, never
            # the child (docs/decisions/0056).
            req.agent.session.append(granted.TYPE, granted.to_data())
        if req.origin is not None:
            entry = self._pending.pop(request_id, None)
            if entry is not None:
                closed = ApprovalPendingClosed(request_id, outcome)
                req.agent.session.append(closed.TYPE, closed.to_data())
                self._ctx.emit(APPROVAL_RESOLVED, ApprovalResolved(entry, outcome))
        return decided

    async def _flush(self, session: Session) -> None:
        store = self._ctx.get(SESSIONS_SERVICE)
        if store is not None:
            await store.flush(session)

    async def _commit(self, session: Session) -> None:
        store = self._ctx.get(SESSIONS_SERVICE)
        if store is not None:
            await store.commit(session)

    async def _decide(self, req: ApprovalRequest, session: Session) -> _Decision:
        """The outcome and, when an answerer said so, who answered (or how it failed)."""
        if req.signal is not None and req.signal.aborted:
            return _Decision(ApprovalOutcome.CANCELLED)
        try:
            policy = self.effective_policy(session)
        except InvalidPolicyError:
            # A corrupt stored policy: nobody can say what the session allows. Deny.
            log.exception("approval: cannot fold the policy of session %s", session.id)
            return _Decision(ApprovalOutcome.UNAVAILABLE)
        if policy is ApprovalPolicy.NEVER:
            return _Decision(ApprovalOutcome.REJECTED)
        # The answerers run as a task of the runtime, raced through a shield: an abort (or our
        # own cancellation) cancels them but does not wait for them, so an answerer that
        # ignores cancellation cannot hold up the cancelled outcome. The runtime still owns
        # the task: closing the kernel cancels and awaits it; a late answer is discarded.
        ask = self._ctx.spawn(self._consult(req), name=f"approval of {req.tool_name}", report=False)
        ask.add_done_callback(_discard_late)
        try:
            return await race(req.signal, asyncio.shield(ask))
        except AbortedError:
            if ask.done() and not ask.cancelled() and ask.exception() is None:
                return ask.result()  # answered together with the abort: who answered counts
            return _Decision(ApprovalOutcome.CANCELLED)
        finally:
            ask.cancel()

    async def _consult(self, req: ApprovalRequest) -> _Decision:
        try:
            raw = await answer_within(
                self.timeout,
                self._ctx.waterfall(
                    APPROVAL_REQUEST,
                    req,
                    fallback=ApprovalOutcome.UNAVAILABLE,
                    scope=req.agent,
                ),
                req.tool_name,
            )
        except Exception:
            log.exception("an approval answerer failed for %s", req.tool_name)
            return _Decision(ApprovalOutcome.UNAVAILABLE)
        if isinstance(raw, AnswererFailure):
            return _Decision(ApprovalOutcome.UNAVAILABLE, failure=raw)
        value, by, wanted = (
            (raw.outcome, raw.by, raw.scope) if isinstance(raw, Answer) else (raw, None, None)
        )
        outcome = as_outcome(value)
        if outcome is None:
            log.warning("an approval answerer returned %r, not an outcome", value)
            return _Decision(ApprovalOutcome.UNAVAILABLE)
        if outcome not in GRANTING:
            return _Decision(outcome, by)
        chosen = _granted_scope(req.choices, outcome, wanted)
        if isinstance(chosen, AnswererFailure):
            log.warning("an approval answerer %s; the ask is unavailable", chosen.describe())
            return _Decision(ApprovalOutcome.UNAVAILABLE, by, failure=chosen)
        return _Decision(outcome, by, scope=chosen)

    # -- rules and grants ----------------------------------------------------------------
    def _workspace(self, session: Session) -> str:
        sandbox = self._ctx.get(SANDBOX_POLICY_SERVICE)
        if sandbox is not None:
            return sandbox.resolve(session).workspace_root
        return real_path(session.header.cwd or os.getcwd())

    def _verdict(self, req: ApprovalRequest, session: Session, *, may_allow: bool) -> Verdict:
        rules = binding_rules(self._ctx.get(PERMISSION_RULES), session)
        if not rules and (not may_allow or session.last(ApprovalGranted.TYPE) is None):
            return NO_VERDICT  # nothing could decide: no need to know the call's facts
        facts = call_facts(req.tool_name, req.action, req.target_mode, self._workspace(session))
        return verdict(rules, session, facts, may_allow=may_allow)

    def _permissions(
        self, req: ApprovalRequest, session: Session
    ) -> tuple[_Decision | None, ApprovalRequest]:
        """How the rules and grants decide ``req`` of ``session`` (the asking session; the
        child of a routed request): the decision they make (``None``: the answerers decide),
        and the request the answerers get, with the grants they may make."""
        try:
            found = self._verdict(req, session, may_allow=req.origin is None)
        except Exception:
            # A damaged captured rule or grant record: nobody can say what binds the session.
            log.exception("approval: cannot read the permission rules of session %s", session.id)
            return _Decision(ApprovalOutcome.UNAVAILABLE), req
        if found.decision == "deny" and found.rule is not None:
            return _Decision(
                ApprovalOutcome.REJECTED, decided_by="rule", rule=cite(found.rule)
            ), req
        if found.decision == "allow" and found.grant is not None:
            decision = _Decision(
                ApprovalOutcome.ALLOWED_ONCE,
                decided_by="grant",
                grant=found.grant.id,
                scope=found.grant.scope,
            )
            return decision, req
        if found.decision == "allow" and found.rule is not None:
            return _Decision(
                ApprovalOutcome.ALLOWED_ONCE, decided_by="rule", rule=cite(found.rule)
            ), req
        if found.decision == "ask" or (is_child(session) and req.origin is None):
            return None, req  # no grant could ever decide this ask: none is offered
        return None, replace(req, choices=self._choices(req, session))

    def _choices(self, req: ApprovalRequest, session: Session) -> GrantChoices:
        facts = call_facts(req.tool_name, req.action, req.target_mode, self._workspace(session))
        rules = self._ctx.get(PERMISSION_RULES)
        refused = "no rule store is composed" if rules is None else rules.always_refusal()
        return GrantChoices(scope_offers(facts), refused is None, refused)

    async def _keep_always(
        self, req: ApprovalRequest, request_id: str, decision: _Decision
    ) -> _Decision:
        """An ``allowed-always`` decision with its rule kept in the user's rules file, or,
        when it cannot be, with why (it then holds for the session only)."""
        if decision.outcome is not ApprovalOutcome.ALLOWED_ALWAYS or decision.scope is None:
            return decision
        rules = self._ctx.get(PERMISSION_RULES)
        if rules is None:
            return decision._replace(rule_error="no rule store is composed")
        try:
            stored = await asyncio.to_thread(
                rules.add_always,
                decision.scope,
                session=req.agent.session.id,
                approval=request_id,
                granted_by=decision.answered_by,
            )
        except RuleStoreError as err:
            log.warning("approval: the always rule could not be kept: %s", err)
            return decision._replace(rule_error=str(err))
        return decision._replace(rule_id=stored.id)

    def screens(self, session: Session) -> bool:
        """Whether any permission rule binds ``session``, so :meth:`screen` has anything to say
        of its calls (a caller may skip describing a call to it otherwise). Raises when the
        session's captured rules cannot be read."""
        return bool(binding_rules(self._ctx.get(PERMISSION_RULES), session))

    async def screen(self, req: ApprovalRequest) -> Screened:
        """What the permission rules say of a tool call before its hooks and gates decide:
        a ``deny`` rule refuses it, written as an audit pair (``approval/asked`` whose reason
        is the rule, ``approval/decided {outcome: rejected, decided_by: rule, rule}``) and
        flushed before returning; an ``ask`` rule makes it ask. Raises (nothing written) when
        the session's rules cannot be read, or for a refusal outside an open turn."""
        session = req.agent.session
        found = self._verdict(req, session, may_allow=False)
        if found.decision == "ask":
            return Screened(ask=found.rule)
        if found.decision != "deny" or found.rule is None:
            return Screened()
        _require_turn(req, session)
        request_id = str(uuid.uuid4())
        asked = _asked(req, request_id, found.rule.describe(), None)
        session.append(asked.TYPE, asked.to_data())
        decided = ApprovalDecided(
            request_id, ApprovalOutcome.REJECTED, decided_by="rule", rule=cite(found.rule)
        )
        session.append(decided.TYPE, decided.to_data())
        await self._flush(session)
        return Screened(denied=found.rule)


def _granted_scope(
    choices: GrantChoices | None, outcome: ApprovalOutcome, wanted: GrantScope | ScopeKind | None
) -> GrantScope | AnswererFailure:
    """The offered scope an answer granting ``outcome`` chose, or why it chose none that
    was offered (refused, never narrowed)."""
    if choices is None or outcome not in choices.outcomes():
        why = (
            f"{outcome.value} was not offered"
            if choices is None or not choices.scopes
            else f"{outcome.value} was not offered ({choices.always_refused})"
        )
        return AnswererFailure("scope-not-offered", excerpt=printable(why)[:EXCERPT_CHARS])
    picked = choices.pick(wanted)
    if picked is None:
        shown = wanted.to_data() if isinstance(wanted, GrantScope) else wanted
        offered = ", ".join(scope.rule for scope in choices.scopes)
        why = f"scope {shown!r} is not one of the offered {offered}"
        return AnswererFailure("scope-not-offered", excerpt=printable(why)[:EXCERPT_CHARS])
    return picked


async def answer_within(
    seconds: float | None, answering: Awaitable[T], what: str
) -> T | Literal[ApprovalOutcome.UNAVAILABLE]:
    """The one rule for a deadline on an answer: past ``seconds`` (``None``: no deadline) the
    ask is ``unavailable``, and the answerer is cancelled. The service applies it to the whole
    waterfall (``timeout_seconds``); an answerer with a deadline of its own applies it too."""
    try:
        async with asyncio.timeout(seconds) as deadline:
            return await answering
    except TimeoutError:
        if not deadline.expired():
            raise  # the answerer's own TimeoutError: a failure, not the deadline
        log.warning("approval for %s timed out after %ss", what, seconds)
        return ApprovalOutcome.UNAVAILABLE


def _discard_late(task: asyncio.Task[_Decision]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved on purpose: after an abort the answer is moot


# -- plugin ------------------------------------------------------------------------------
class ApprovalConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    policy: ApprovalPolicy = ApprovalPolicy.ASK
    timeout_seconds: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Per-request answer deadline; past it the request resolves ``unavailable``."""


class ApprovalPlugin:
    """Provides ``approval`` and the ``approval:policy`` runtime context (order 115)."""

    name = "approval"
    requires: tuple[AnyServiceKey, ...] = ()
    config_model = ApprovalConfig

    def apply(self, ctx: Context, config: ApprovalConfig) -> None:
        service = ApprovalService(ctx, config.policy, config.timeout_seconds)
        ctx.provide(APPROVAL_SERVICE, service)
        ctx.context(APPROVAL_CONTEXT_NAME, APPROVAL_CONTEXT_ORDER, service.context_text)


approval_plugin: Final = ApprovalPlugin()

__all__ = [
    "APPROVAL_CONTEXT_NAME",
    "APPROVAL_CONTEXT_ORDER",
    "APPROVAL_PENDING",
    "APPROVAL_REQUEST",
    "APPROVAL_RESOLVED",
    "APPROVAL_SERVICE",
    "ASK_TEXT",
    "NEVER_TEXT",
    "NOTICE_SOURCE",
    "Answer",
    "Answerer",
    "ApprovalConfig",
    "ApprovalPlugin",
    "ApprovalReply",
    "ApprovalRequest",
    "ApprovalResolved",
    "ApprovalService",
    "AskedAction",
    "GrantChoices",
    "PendingApproval",
    "RoutedOrigin",
    "Screened",
    "answer_within",
    "approval_context_text",
    "approval_plugin",
    "fold_approval_policy",
    "policy_change_notice",
    "register_answerer",
]
