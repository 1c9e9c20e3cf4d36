"""The ``--approver CMD`` answerer: a program decides each approval request.

For every request the command runs once (argv from ``shlex.split``; no shell, so wrap it in
``sh -c '...'`` if you need one). It reads one JSON object on stdin::

    {"approval_id": ..., "session_id": ..., "delegation_depth": 0, "label": null,
     "tool_name": "bash", "call_id": ..., "reason": ..., "action": {"tool": "bash",
     "command": "npm test --watch"},
     "outcomes": ["allowed-once", "allowed-for-session", "allowed-always", "rejected"],
     "scopes": [{"kind": "exact", "rule": "Bash(npm test --watch)"},
                {"kind": "prefix", "rule": "Bash(npm test:*)"},
                {"kind": "prefix", "rule": "Bash(npm:*)"}, {"kind": "tool", "rule": "Bash"}]}

``label`` is the asking child's (``null`` for a top-level session); ``outcomes`` are the
answers it may give, and ``scopes`` what an answer that grants may cover, narrowest first (an
escalation's carry its ``target_mode``). It answers on stdout with one of ``outcomes``, as a
bare word or as ``{"outcome": "..."}``; an answer that grants may choose its scope,
``{"outcome": "allowed-for-session", "scope": {"kind": "prefix"}}`` (the first offer of that
kind) or ``"scope": {"kind": "prefix", "rule": "Bash(npm:*)"}`` (that offer), else it gets the
narrowest. A non-zero exit, a timeout, a crash, a scope that was not offered (refused, never
narrowed), or any other output is ``unavailable``, which fails the ask closed; the
:class:`AnswererFailure` that says which (with the exit status and a short escaped excerpt of
what it printed) goes into ``approval/decided {failure}``, one line on stderr, and the model's
refusal.

The approver runs outside the sandbox and its answer is final, so its program must be one no
agent can rewrite (:mod:`tether.sandbox._programs`): checked when the plugin loads, and again
before every run (a file the command names may appear later); a refused run is
``unavailable``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shlex
from typing import Final, TypeGuard

from pydantic import BaseModel, ConfigDict, Field

from tether._signals import cancel_and_wait
from tether.errors import TetherError
from tether.kernel import AnyServiceKey, Context, Next
from tether.kernel._printable import printable
from tether.policy._approval import Answer, ApprovalReply, ApprovalRequest, register_answerer
from tether.policy._events import (
    EXCERPT_CHARS,
    SCOPE_KINDS,
    AnswererFailure,
    AnswererFailureKind,
    ApprovalAsked,
    GrantScope,
    ScopeKind,
)
from tether.policy._modes import GRANTING, as_outcome
from tether.policy._sandbox_policy import SANDBOX_POLICY_SERVICE
from tether.sandbox import SANDBOX_SERVICE, SandboxError
from tether.sandbox._paths import path_rules
from tether.sandbox._programs import refuse_rewritable
from tether.session import JsonValue, Session
from tether.subagents._events import Descriptor

log = logging.getLogger(__name__)

ANSWERS: Final = frozenset({"allowed-once", "allowed-for-session", "allowed-always", "rejected"})
"""The words an approver may print (when the request's ``outcomes`` offer them)."""
MAX_OUTPUT: Final = 64 * 1024
REAP_GRACE: Final = 5.0
"""Seconds a killed approver gets to close its pipes and be reaped."""


def request_payload(request: ApprovalRequest) -> dict[str, JsonValue]:
    """The JSON the command reads. For a routed question the asking session is the child
    (its log holds the audit pair), and ``origin`` says so, with the lineage up to the root."""
    origin = request.origin
    session = (origin.child if origin is not None else request.agent).session
    asked = session.last(ApprovalAsked.TYPE)
    choices = request.choices
    payload: dict[str, JsonValue] = {
        "approval_id": ApprovalAsked.from_data(asked.data).id if asked is not None else None,
        "session_id": session.id,
        "delegation_depth": session.header.delegation_depth,
        "label": child_label(session),
        "tool_name": request.tool_name,
        "call_id": request.call_id,
        "reason": request.reason,
        "action": dict(request.action or {}),
        "outcomes": [outcome.value for outcome in request.outcomes()],
        "scopes": [scope.to_data() for scope in choices.scopes] if choices is not None else [],
    }
    if origin is not None:
        payload["origin"] = {
            "child_session_id": origin.child_session_id,
            "call_id": origin.call_id,
            "tool_name": origin.tool_name,
            "arguments_summary": origin.arguments_summary,
            "lineage": list(origin.lineage),
            "decided_by": request.agent.session.id,
        }
    return payload


def child_label(session: Session) -> str | None:
    """The label a delegated child was given (its descriptor's), else ``None``."""
    recorded = session.last(Descriptor.TYPE)
    descriptor = Descriptor.parse(recorded.data) if recorded is not None else None
    return descriptor.label if descriptor is not None else None


def parse_answer(stdout: bytes) -> str | Answer | AnswererFailure:
    """The outcome the program printed (with the scope it chose), or why what it printed is
    none. Whether the outcome and scope were offered is the approval service's to check."""
    text = stdout.decode("utf-8", "replace").strip()
    if text in ANSWERS:
        return text
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # nested too deeply is invalid output too
        return _failure("invalid-output", stdout)
    if not isinstance(value, dict):
        return _failure("invalid-output", stdout)
    outcome = value.get("outcome")
    if outcome not in ANSWERS:
        if isinstance(outcome, str):
            return _failure("unknown-outcome", stdout)
        return _failure("invalid-output", stdout)
    if "scope" not in value:
        return str(outcome)
    scope = _scope(value["scope"])
    if scope is None or as_outcome(outcome) not in GRANTING:
        return _failure("invalid-output", stdout)  # a scope only goes with a grant
    return Answer(str(outcome), scope=scope)


def _is_scope_kind(value: object) -> TypeGuard[ScopeKind]:
    return value in SCOPE_KINDS


def _scope(raw: object) -> GrantScope | ScopeKind | None:
    """``{"kind"}``, ``{"kind", "rule"}`` (and the ``target_mode`` the offer had), or
    ``None`` when it is not a scope at all."""
    if not isinstance(raw, dict) or set(raw) - {"kind", "rule", "target_mode"}:
        return None
    kind, rule = raw.get("kind"), raw.get("rule")
    if not _is_scope_kind(kind):
        return None
    if rule is None:
        return kind if "target_mode" not in raw else None
    try:
        return GrantScope.from_data(raw, "an approver's scope")
    except TetherError:
        return None


async def ask_command(
    argv: list[str], request: ApprovalRequest, timeout: float
) -> str | Answer | AnswererFailure:
    data = (json.dumps(request_payload(request)) + "\n").encode()
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as err:
        return _reported(_failure("not-started", str(err).encode()))
    try:
        stdout, stderr = await asyncio.wait_for(_read(proc, data), timeout)
    except TimeoutError:
        return _reported(AnswererFailure("timeout"))
    except OSError as err:
        return _reported(_failure("invalid-output", str(err).encode()))
    finally:
        if proc.returncode is None:  # timed out, flooded or cancelled: the whole group goes
            _kill(proc)
            await _reap(proc)
    if len(stdout) > MAX_OUTPUT:  # stopped by us for the flood, not killed by someone
        return _reported(_failure("too-much-output", stdout[:EXCERPT_CHARS]))
    if proc.returncode is not None and proc.returncode < 0:
        return _reported(AnswererFailure("killed", -proc.returncode))
    if proc.returncode != 0:
        return _reported(_failure("exit-status", stderr or stdout, exit_code=proc.returncode))
    answer = parse_answer(stdout)
    return _reported(answer) if isinstance(answer, AnswererFailure) else answer


async def _read(proc: asyncio.subprocess.Process, data: bytes) -> tuple[bytes, bytes]:
    """Write the request, then read at most one byte past :data:`MAX_OUTPUT` of stdout (and as
    much of stderr) until the program exits: a flood is cut off, never buffered whole."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        proc.stdin.write(data)
        await proc.stdin.drain()
    proc.stdin.close()
    errors = asyncio.ensure_future(_read_upto(proc.stderr, MAX_OUTPUT))
    try:
        out = await _read_upto(proc.stdout, MAX_OUTPUT)
        if len(out) > MAX_OUTPUT:
            return out, b""  # the caller's ``finally`` stops the program
        err = await errors
        await proc.wait()
        return out, err
    finally:
        await cancel_and_wait(errors)


async def _read_upto(stream: asyncio.StreamReader, limit: int) -> bytes:
    """Up to ``limit + 1`` bytes (one more than allowed says "too much"), or all until EOF."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = await stream.read(limit + 1 - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _failure(
    kind: AnswererFailureKind, output: bytes, *, exit_code: int | None = None
) -> AnswererFailure:
    text = " ".join(output.decode("utf-8", "replace").split())
    excerpt = printable(text[:EXCERPT_CHARS])[:EXCERPT_CHARS] if text else None
    return AnswererFailure(kind, exit_code, excerpt)


def _reported(failure: AnswererFailure) -> AnswererFailure:
    # One line on stderr (the run's log handler or Python's last-resort one); the audit pair
    # carries the same failure.
    log.warning("tether: the configured approver %s; the ask is unavailable", failure.describe())
    return failure


async def _reap(proc: asyncio.subprocess.Process) -> None:
    """Wait for a killed program, reading its pipes to their end first: asyncio's ``wait()``
    returns only once every pipe has closed, and a pipe left full (a flood cut off) is no
    longer read, so it would never close. Bounded: a process outside the group that still
    holds a pipe is left to the transport's own clean-up rather than hang the ask."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(REAP_GRACE):
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    while await stream.read(65536):
                        pass
            await proc.wait()


def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, 9)


def refuse_rewritable_approver(ctx: Context, argv: list[str]) -> None:
    """Raise ``REWRITABLE_PROGRAM`` when ``argv`` (run from the harness's directory, found on
    its ``PATH``) names a file an agent of this composition may write. Without a workspace
    (no sandbox policy composed, or not yet) no agent writes anywhere, so nothing is checked."""
    policies = ctx.get(SANDBOX_POLICY_SERVICE)
    workspace = policies.workspace_root if policies is not None else None
    if not workspace:
        return
    sandbox = ctx.get(SANDBOX_SERVICE)
    rules = sandbox.path_rules() if sandbox is not None else path_rules(os.environ)
    refuse_rewritable(
        "the approver",
        argv,
        cwd=os.getcwd(),
        workspace=workspace,
        rules=rules,
        search_path=os.environ.get("PATH"),
    )


class CommandApproverConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    command: str = Field(min_length=1)
    timeout_seconds: float = Field(default=120.0, gt=0)


class CommandApproverPlugin:
    """Registers the command as a global ``approval/request`` answerer."""

    name = "approver_command"
    requires: tuple[AnyServiceKey, ...] = ()
    config_model = CommandApproverConfig

    def apply(self, ctx: Context, config: CommandApproverConfig) -> None:
        argv = shlex.split(config.command)
        refuse_rewritable_approver(ctx, argv)

        async def answer(
            request: ApprovalRequest, _next: Next[ApprovalReply]
        ) -> str | Answer | AnswererFailure:
            try:
                refuse_rewritable_approver(ctx, argv)
            except SandboxError as err:
                return _reported(_failure("refused", str(err).encode()))
            return await ask_command(argv, request, config.timeout_seconds)

        register_answerer(ctx, answer)


plugin: Final = CommandApproverPlugin()
