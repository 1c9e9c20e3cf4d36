"""The ``--approver CMD`` answerer: a program decides each approval request.

For every request the command runs once (argv from ``shlex.split``; no shell, so wrap it in
``sh -c '...'`` if you need one). It reads one JSON object on stdin::

    {"approval_id": ..., "session_id": ..., "delegation_depth": 0, "tool_name": "write",
     "call_id": ..., "reason": ..., "action": {"tool": "write", "path": "x.txt"}}

and answers on stdout with ``allowed-once`` or ``rejected``, as a bare word or as
``{"outcome": "..."}``. A non-zero exit, a timeout, a crash, or any other output is
``unavailable``, which fails the ask closed.

The approver runs outside the sandbox and its answer is final, so its program must be one no
agent can rewrite (:mod:`tether.sandbox.programs`): checked when the plugin loads, and again
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
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from tether.kernel import AnyServiceKey, Context, Next
from tether.policy.approval import ApprovalReply, ApprovalRequest, register_answerer
from tether.policy.events import ApprovalAsked
from tether.policy.sandbox_policy import SANDBOX_POLICY_SERVICE
from tether.sandbox import SANDBOX_SERVICE, SandboxError
from tether.sandbox.paths import path_rules
from tether.sandbox.programs import refuse_rewritable
from tether.session import JsonValue

log = logging.getLogger(__name__)

ANSWERS: Final = frozenset({"allowed-once", "rejected"})
MAX_OUTPUT: Final = 64 * 1024


def request_payload(request: ApprovalRequest) -> dict[str, JsonValue]:
    """The JSON the command reads. For a routed question the asking session is the child
    (its log holds the audit pair), and ``origin`` says so, with the lineage up to the root."""
    origin = request.origin
    session = (origin.child if origin is not None else request.agent).session
    asked = session.last(ApprovalAsked.TYPE)
    payload: dict[str, JsonValue] = {
        "approval_id": ApprovalAsked.from_data(asked.data).id if asked is not None else None,
        "session_id": session.id,
        "delegation_depth": session.header.delegation_depth,
        "tool_name": request.tool_name,
        "call_id": request.call_id,
        "reason": request.reason,
        "action": dict(request.action or {}),
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


def parse_answer(stdout: bytes) -> str:
    text = stdout.decode("utf-8", "replace").strip()
    if text in ANSWERS:
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return "unavailable"
    if isinstance(value, dict) and value.get("outcome") in ANSWERS:
        return str(value["outcome"])
    return "unavailable"


async def ask_command(argv: list[str], request: ApprovalRequest, timeout: float) -> str:
    data = (json.dumps(request_payload(request)) + "\n").encode()
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as err:
        log.warning("approver %s could not start: %s", argv[0], err)
        return "unavailable"
    try:
        stdout, _ = await asyncio.wait_for(proc.communicate(data), timeout)
    except TimeoutError:
        return "unavailable"
    except OSError:
        return "unavailable"
    finally:
        if proc.returncode is None:  # timed out or cancelled: the whole group goes
            _kill(proc)
            await proc.wait()
    if proc.returncode != 0:
        return "unavailable"
    return parse_answer(stdout[:MAX_OUTPUT])


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

        async def answer(request: ApprovalRequest, _next: Next[ApprovalReply]) -> str:
            try:
                refuse_rewritable_approver(ctx, argv)
            except SandboxError as err:
                log.warning("approver not run: %s", err)
                return "unavailable"
            return await ask_command(argv, request, config.timeout_seconds)

        register_answerer(ctx, answer)


plugin: Final = CommandApproverPlugin()
