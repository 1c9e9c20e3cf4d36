"""The ``--approver CMD`` answerer: a program decides each approval request.

For every request the command runs once (argv from ``shlex.split``; no shell, so wrap it in
``sh -c '...'`` if you need one). It reads one JSON object on stdin::

    {"approval_id": ..., "session_id": ..., "delegation_depth": 0, "tool_name": "write",
     "call_id": ..., "reason": ..., "action": {"tool": "write", "path": "x.txt"}}

and answers on stdout with ``allowed-once`` or ``rejected``, as a bare word or as
``{"outcome": "..."}``. A non-zero exit, a timeout, a crash, or any other output is
``unavailable``, which fails the ask closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shlex
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from tether.kernel import Context, Next
from tether.policy.approval import ApprovalRequest, register_answerer

log = logging.getLogger(__name__)

ANSWERS: Final = frozenset({"allowed-once", "rejected"})
MAX_OUTPUT: Final = 64 * 1024


def request_payload(request: ApprovalRequest) -> dict[str, Any]:
    session = request.agent.session
    asked = session.last("approval/asked")
    payload: dict[str, Any] = {
        "approval_id": asked.data.get("id") if asked is not None else None,
        "session_id": session.id,
        "delegation_depth": session.header.delegation_depth,
        "tool_name": request.tool_name,
        "call_id": request.call_id,
        "reason": request.reason,
        "action": dict(request.action or {}),
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


class CommandApproverConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    command: str = Field(min_length=1)
    timeout_seconds: float = Field(default=120.0, gt=0)


class CommandApproverPlugin:
    """Registers the command as a global ``approval/request`` answerer."""

    name = "approver_command"
    requires: tuple[str, ...] = ()
    config_model = CommandApproverConfig

    def apply(self, ctx: Context, config: CommandApproverConfig) -> None:
        argv = shlex.split(config.command)

        async def answer(request: ApprovalRequest, _next: Next) -> str:
            return await ask_command(argv, request, config.timeout_seconds)

        register_answerer(ctx, answer)


plugin: Final = CommandApproverPlugin()
