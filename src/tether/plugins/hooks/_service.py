"""The hook service: run the matching commands of one event, serially, with durable records.

For every command it runs, the service appends to the agent's session

- ``hook/invoked {turn, point, dialect, matcher?, handler_id}`` before it starts (``dialect``:
  ``claude-code`` or ``codex``, the protocol of the file the handler came from),
- ``hook/result {turn, point, handler_id, decision, exit_code?, stderr_summary?, duration_ms}``
  when it finished,

where ``point`` is the Claude Code event name. Both must sit inside an open turn
(``docs/hooks.md``, "Durable records"). Hooks that fire outside one (``SessionStart`` at session creation,
``Stop`` after ``turn/end``) still run; only their records are skipped.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

from tether._signals import AbortSignal
from tether.agent._events import TurnOpened
from tether.errors import TetherError
from tether.kernel import SESSIONS_SERVICE, Context, ServiceKey
from tether.kernel._printable import printable
from tether.plugins.hooks._codex import PERMISSION_MODE, interpret_codex
from tether.plugins.hooks._events import HookInvoked, HookResult
from tether.plugins.hooks._hidden import NOT_RUN_STATUSES, hidden_program
from tether.plugins.hooks._payload import base_payload, encode_payload
from tether.plugins.hooks._protocol import (
    FAILED,
    HookReply,
    MergedReply,
    interpret,
    merge,
    stderr_summary,
)
from tether.plugins.hooks._runner import SHELL, CommandRun, hook_env, run_command
from tether.plugins.hooks._settings import (
    CLAUDE_CODE,
    CODEX,
    MATCHED_EVENTS,
    Dialect,
    HookEvent,
    HookHandler,
)
from tether.policy._sandbox_policy import SANDBOX_POLICY_SERVICE
from tether.sandbox import SANDBOX_SERVICE, ConfinedCommand
from tether.session import JsonValue, Session

log = logging.getLogger(__name__)
T = TypeVar("T")

HOOKS_SERVICE: Final[ServiceKey[HookService]] = ServiceKey("hooks")
DIALECT: Final = CLAUDE_CODE
"""The dialect of inline hooks and ``settings_files`` (``codex_files`` are ``codex``)."""
PLUGIN_NAME: Final = "hooks"

Record = Callable[[int], HookInvoked | HookResult]
"""A hook record held back (``dispatch(deferred=...)``): made once its turn is known."""


def context_source(event: HookEvent) -> dict[str, JsonValue]:
    """The ``source`` of a ``user/message`` carrying a hook's context."""
    return {"kind": "plugin", "plugin": PLUGIN_NAME, "hook_event": event.value}


@dataclass(frozen=True, slots=True)
class HookSettings:
    default_timeout: float = 600.0
    pass_env: tuple[str, ...] = ()
    fail_closed: bool = True
    project_dir: str | None = None


@dataclass(frozen=True, slots=True)
class Dispatch:
    """One event's run: every hook's reply (in order) and their merge."""

    replies: tuple[HookReply, ...]
    merged: MergedReply


NOTHING: Final = Dispatch((), MergedReply("none", None, ()))


class HookService:
    """Service ``hooks``: the configured handlers and the machinery to run them."""

    def __init__(
        self, ctx: Context, handlers: Sequence[HookHandler], settings: HookSettings
    ) -> None:
        self._ctx = ctx
        self.handlers = tuple(handlers)
        self.settings = settings
        self._tasks: set[asyncio.Task[object]] = set()

    # -- lookup ---------------------------------------------------------------------------
    def has(self, event: HookEvent) -> bool:
        return any(h.event is event for h in self.handlers)

    def matching(self, event: HookEvent, subject: str | Sequence[str] | None) -> list[HookHandler]:
        """Handlers for ``event`` whose matcher accepts ``subject`` (or one of several names of
        it: a tool's Claude Code name and tether's own); a repeated command runs once (Claude
        Code de-duplicates identical commands, e.g. from two settings files)."""
        names = (subject or "",) if subject is None or isinstance(subject, str) else subject
        seen: set[str] = set()
        out: list[HookHandler] = []
        for handler in self.handlers:
            if handler.event is not event or handler.command in seen:
                continue
            if event in MATCHED_EVENTS and not any(map(handler.matcher.matches, names)):
                continue
            seen.add(handler.command)
            out.append(handler)
        return out

    # -- where --------------------------------------------------------------------------
    def workspace(self, session: Session | None, policy: object | None = None) -> str:
        """The call's workspace root: its policy's, else the sandbox policy service's for the
        session, else the session's cwd, else the configured project dir or process cwd."""
        root = getattr(policy, "workspace_root", None)
        if isinstance(root, str) and root:
            return root
        service = self._ctx.get(SANDBOX_POLICY_SERVICE)
        if service is not None and session is not None:
            try:
                resolved = service.resolve(session=session).workspace_root
            except Exception:
                log.exception("hooks: cannot resolve the sandbox policy of %s", session.id)
            else:
                if isinstance(resolved, str) and resolved:
                    return resolved
        if session is not None and session.header.cwd:
            return session.header.cwd
        return self.settings.project_dir or os.getcwd()

    def transcript_path(self, session: Session | None) -> str | None:
        """The session's log file when the store keeps one (JSONL), else ``None``.

        It is tether's event log, not a Claude Code transcript."""
        return None if session is None else self.transcript_path_of(session.id)

    def transcript_path_of(self, session_id: str) -> str | None:
        store = self._ctx.get(SESSIONS_SERVICE)
        log_path = getattr(getattr(store, "persistence", None), "log_path", None)
        if not callable(log_path):
            return None
        try:
            return str(log_path(session_id))
        except Exception:
            return None

    # -- running ------------------------------------------------------------------------
    async def dispatch(
        self,
        event: HookEvent,
        fields: Mapping[str, JsonValue],
        *,
        session: Session | None,
        subject: str | Sequence[str] | None = None,
        workspace: str | None = None,
        signal: AbortSignal | None = None,
        background: bool = False,
        deferred: list[Record] | None = None,
        codex_fields: Mapping[str, JsonValue] | None = None,
    ) -> Dispatch:
        """Run every matching hook of ``event`` serially and merge their replies.

        ``fields`` are the event-specific payload fields; the common ones (``session_id``,
        ``transcript_path``, ``cwd``, ``hook_event_name``) are added here. Never raises for
        anything a hook does.

        ``background``: nothing waits for this dispatch inside the turn (Stop, SessionStart,
        Subagent*), so the turn may end while a hook runs. Its ``hook/invoked`` is then written
        together with its ``hook/result``, and only when the turn open at the start is still
        open: the log never holds half a pair, and a hook that began outside a turn (Stop,
        SessionStart) is never recorded in one that opened meanwhile.

        ``deferred``: no turn is open yet and one may never be (``UserPromptSubmit`` runs
        before its turn): the records are appended to this list instead, for the caller to
        write into the turn once it opens (:func:`write_records`), or to drop.

        ``codex_fields`` are added to the payload of Codex-dialect handlers only.
        """
        handlers = self.matching(event, subject)
        if not handlers:
            return NOTHING
        root = workspace or self.workspace(session)
        cwd = session.header.cwd if session is not None and session.header.cwd else root
        payload = base_payload(
            event, session.id if session is not None else None, cwd, self.transcript_path(session)
        )
        payload.update(fields)
        data: dict[Dialect, bytes] = {CLAUDE_CODE: encode_payload(payload)}
        if any(h.dialect == CODEX for h in handlers):
            data[CODEX] = encode_payload(
                {**payload, **_codex_common(session), **(codex_fields or {})}
            )
        env = hook_env(root, self.settings.pass_env)
        replies: list[HookReply] = []
        for handler in handlers:
            run = _Run(handler, data[handler.dialect], root, session, signal, background, deferred)
            replies.append(await self._run_one(run, env))
        return Dispatch(tuple(replies), merge(replies))

    async def _run_one(self, run: _Run, env: Mapping[str, str]) -> HookReply:
        handler, session = run.handler, run.session
        point = handler.event.value

        def invoked(turn: int) -> HookInvoked:
            return HookInvoked(
                turn, handler.event, handler.handler_id, handler.matcher.pattern, handler.dialect
            )

        if run.deferred is not None:
            run.deferred.append(invoked)
            turn = None
        elif run.background:
            turn = _open_turn(session)
        else:
            turn = _record(session, None, invoked)
        started = time.monotonic()
        confined = self._confine(handler.command, session, env)
        try:
            if isinstance(confined, CommandRun):
                done = confined
            else:
                done = await run_command(
                    handler.command,
                    run.data,
                    cwd=run.root,
                    env=confined.env if confined is not None else env,
                    timeout=handler.timeout or self.settings.default_timeout,
                    signal=run.signal,
                    argv=confined.argv if confined is not None else None,
                )
        except asyncio.CancelledError:
            _close(confined)
            # Torn down mid-hook (the group is already killed): close the pair we opened.
            took = int((time.monotonic() - started) * 1000)

            def closing(at: int) -> HookResult:
                return HookResult(at, handler.event, handler.handler_id, "cancelled", took)

            if run.deferred is not None:
                run.deferred.append(closing)
            elif turn is not None and not run.background:
                _record(session, turn, closing)
            raise
        _close(confined)
        reply = (interpret_codex if handler.dialect == CODEX else interpret)(handler.event, done)
        if (
            confined is not None
            and reply.decision == "error"
            and done.exit_code in NOT_RUN_STATUSES
        ):
            sandbox = self._ctx.get(SANDBOX_SERVICE)
            hidden = hidden_program(handler.command, env, sandbox.path_rules()) if sandbox else None
            if hidden is not None:
                reply = dataclasses.replace(reply, problem=hidden)
        summary = stderr_summary(done.stderr) or done.error

        def result(at: int) -> HookResult:
            return HookResult(
                at,
                handler.event,
                handler.handler_id,
                reply.decision,
                done.duration_ms,
                done.exit_code,
                summary or None,
            )

        if run.deferred is not None:
            run.deferred.append(result)
        elif turn is not None and (
            not run.background or _record(session, turn, invoked) is not None
        ):
            _record(session, turn, result)
        if reply.decision in FAILED:
            log.warning("%s hook %s: %s", point, handler.handler_id, printable(reply.problem or ""))
            if self.settings.fail_closed and handler.event is HookEvent.PRE_TOOL_USE:
                return HookReply(
                    "deny",
                    f"{point} hook {handler.handler_id} failed ({reply.problem}); "
                    "denied because hooks fail closed",
                )
        return reply

    def _confine(
        self, command: str, session: Session | None, env: Mapping[str, str]
    ) -> ConfinedCommand | CommandRun | None:
        """The command confined under the session's sandbox mode (issue 4 item 4).

        ``None`` when no sandbox is composed (hooks then run as Claude Code runs them); a
        failed ``CommandRun`` when the sandbox cannot confine (never run unconfined instead).
        """
        sandbox = self._ctx.get(SANDBOX_SERVICE)
        policies = self._ctx.get(SANDBOX_POLICY_SERVICE)
        if sandbox is None or policies is None:
            return None
        try:
            policy = policies.resolve(session=session)
            return sandbox.confine(
                [SHELL, "-c", command],
                policy,
                env=env,
                extra_env={k: v for k, v in env.items() if k.startswith("CLAUDE_")},
            )
        except TetherError as err:
            return CommandRun("spawn-failed", None, "", "", 0, f"{err.code}: {err}")

    # -- background runs ----------------------------------------------------------------
    def spawn(self, coro: Coroutine[object, object, T], what: str) -> asyncio.Task[T]:
        """Run ``coro`` in the background as a task of the runtime (closing the kernel cancels
        and awaits it), tracked so :meth:`settle` can wait for it and unloading the plugin can
        cancel it (which kills its command's process group)."""
        task = self._ctx.spawn(coro, name=f"hooks: {what}", report=False)
        self._tasks.add(task)

        def done(fut: asyncio.Task[T]) -> None:
            self._tasks.discard(fut)
            if not fut.cancelled() and fut.exception() is not None:
                log.error("hooks: %s failed: %s", what, printable(str(fut.exception())))

        task.add_done_callback(done)
        return task

    async def settle(self) -> None:
        """Wait until no background hook (Stop, SessionStart, Subagent*) is running."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()


@dataclass(frozen=True, slots=True)
class _Run:
    """One handler's run within a dispatch: what it reads and where it is recorded."""

    handler: HookHandler
    data: bytes
    root: str
    session: Session | None
    signal: AbortSignal | None
    background: bool
    deferred: list[Record] | None


def _codex_common(session: Session | None) -> dict[str, JsonValue]:
    """The fields Codex adds to every hook's stdin: ``turn_id`` (the open or last turn) and
    ``permission_mode``."""
    fields: dict[str, JsonValue] = {}
    start = session.last(TurnOpened.TYPE) if session is not None else None
    opened = TurnOpened.parse(start.data) if start is not None else None
    if opened is not None:
        fields["turn_id"] = str(opened.turn)
    fields["permission_mode"] = PERMISSION_MODE
    return fields


def write_records(session: Session | None, records: Sequence[Record]) -> None:
    """Write records held back by ``dispatch(deferred=...)`` into the turn now open."""
    for record in records:
        _record(session, None, record)


def _open_turn(session: Session | None) -> int | None:
    if session is None or not session.has_open_turn():
        return None
    start = session.last(TurnOpened.TYPE)
    opened = TurnOpened.parse(start.data) if start is not None else None
    return opened.turn if opened is not None else None


def _record(session: Session | None, turn: int | None, record: Record) -> int | None:
    """Append a hook record inside the open turn (``turn``: the one the pair started in);
    returns that turn, or ``None`` when there is no open turn to put it in. A result is only
    written next to its ``hook/invoked``, so a hook that started between turns (SessionStart)
    never leaves half a pair in the turn that opened meanwhile."""
    current = _open_turn(session)
    if session is None or current is None or (turn is not None and current != turn):
        return None
    event = record(current)
    try:
        session.append(event.TYPE, event.to_data())
    except Exception:
        log.exception("hooks: cannot append %s to session %s", event.TYPE, session.id)
        return None
    return current


__all__ = [
    "DIALECT",
    "HOOKS_SERVICE",
    "NOTHING",
    "Dispatch",
    "HookService",
    "HookSettings",
    "Record",
    "context_source",
    "write_records",
]


def _close(confined: object) -> None:
    close = getattr(confined, "close", None)
    if callable(close):
        close()
