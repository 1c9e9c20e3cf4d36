"""The escalation ladder through the real tool pipeline: every fail-closed text, the strictly
wider check without a prompt, the one-call grant, and the audit pair (``policy/_escalation.py``)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from compose_support import compose_kernel
from tether._signals import AbortSignal
from tether.kernel._plugin import Kernel
from tether.policy import SANDBOX_POLICY_SERVICE
from tether.policy._approval import register_answerer
from tether.policy._escalation import denial_hint
from tether.sandbox import SandboxProvider
from tether.session import Session
from tether.tools._bash import BashTool
from tether.tools._pipeline import ToolRuntime
from tether.tools.fs import file_tools

MARKER = "[sandbox: file access denied under read-only mode]"


class Owner:
    def __init__(self, session: Session) -> None:
        self.session = session


def compose(
    tmp_path: Path,
    *,
    answer: str | None = "allowed-once",
    policy: str = "ask",
    approval: bool = True,
    sandbox: bool = True,
) -> tuple[Kernel, ToolRuntime, Owner, list[Any]]:
    rig = compose_kernel(
        tmp_path,
        mode="read-only",
        approval=policy if approval else None,
        sandbox=SandboxProvider() if sandbox else None,
        answer=answer,
        tools=file_tools(),
    )
    return rig.kernel, rig.tools, Owner(rig.session(turn=True)), rig.asked


def args(**extra: str) -> str:
    return json.dumps({"path": "out.txt", "content": "x", **extra})


ESCALATE = {"sandbox_permissions": "workspace-write", "justification": "needs the file"}


async def run(
    tools: ToolRuntime, owner: Owner | None, raw: str, signal: AbortSignal | None = None
) -> Any:
    return await tools.execute(owner, "call-1", "write", raw, signal or AbortSignal())  # type: ignore[arg-type]


def audit(owner: Owner) -> list[tuple[str, dict[str, Any]]]:
    return [
        (e.type, json.loads(json.dumps(dict(e.data), default=list)))
        for e in owner.session.events
        if e.type.startswith("approval/")
    ]


def test_fields_are_advertised_only_under_a_confining_sandbox(tmp_path: Path) -> None:
    _, tools, _, _ = compose(tmp_path)
    schemas = {name: params for name, _, params in tools.schemas()}
    assert schemas["write"]["properties"]["sandbox_permissions"]["enum"] == [
        "workspace-write",
        "danger-full-access",
    ]
    assert "justification" in schemas["edit"]["properties"]
    assert "sandbox_permissions" not in schemas["read"]["properties"]
    _, plain, _, _ = compose(tmp_path, sandbox=False)
    assert all("sandbox_permissions" not in p["properties"] for _, _, p in plain.schemas())


async def test_without_a_confining_sandbox_the_fields_are_unknown_arguments(tmp_path: Path) -> None:
    _, tools, owner, asked = compose(tmp_path, sandbox=False)
    result = await run(tools, owner, args(**ESCALATE))
    assert result.is_error and 'invalid arguments for tool "write"' in result.content
    assert asked == [] and not (tmp_path / "out.txt").exists()


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        (
            {"sandbox_permissions": "workspace-write"},
            "sandbox_permissions and justification must be given together",
        ),
        ({"justification": "why"}, "sandbox_permissions and justification must be given together"),
        (
            {"sandbox_permissions": "workspace-write", "justification": "  "},
            "justification must be a non-empty string",
        ),
        (
            {"sandbox_permissions": "everything", "justification": "why"},
            "sandbox_permissions must be one of workspace-write, danger-full-access",
        ),
    ],
)
async def test_argument_errors(tmp_path: Path, extra: dict[str, str], problem: str) -> None:
    _, tools, owner, asked = compose(tmp_path)
    result = await run(tools, owner, args(**extra))
    assert result.content == f'Error: invalid arguments for tool "write": {problem}'
    assert asked == [] and audit(owner) == []


async def test_allowed_once_widens_this_call_only(tmp_path: Path) -> None:
    _, tools, owner, asked = compose(tmp_path)
    first = await run(tools, owner, args(**ESCALATE))
    assert not first.is_error, first.content
    assert (tmp_path / "out.txt").read_text() == "x"
    assert [r.reason for r in asked] == ["escalate sandbox to workspace-write: needs the file"]
    kinds = audit(owner)
    assert [k for k, _ in kinds] == ["approval/asked", "approval/decided"]
    assert kinds[0][1]["tool_name"] == "write" and kinds[0][1]["call_id"] == "call-1"
    assert kinds[1][1]["outcome"] == "allowed-once"
    # the grant died with the call: the same call without escalation is confined again
    (tmp_path / "out.txt").unlink()
    again = await run(tools, owner, args())
    assert again.is_error and MARKER in again.content
    assert not (tmp_path / "out.txt").exists()
    assert not any(e.type == "sandbox/mode" for e in owner.session.events)


async def test_not_strictly_wider_is_refused_without_a_prompt(tmp_path: Path) -> None:
    kernel, tools, owner, asked = compose(tmp_path)
    service = kernel.ctx.get(SANDBOX_POLICY_SERVICE)
    assert service is not None
    service.set_sandbox_mode(owner.session, "workspace-write")
    result = await run(tools, owner, args(**ESCALATE))
    assert result.content == (
        'Error: sandbox escalation to "workspace-write" is not strictly wider than this '
        'call\'s current "workspace-write" mode'
    )
    assert asked == [] and audit(owner) == []
    assert not (tmp_path / "out.txt").exists()


@pytest.mark.parametrize(
    ("answer", "text"),
    [
        ("rejected", 'the user rejected escalating this operation to "workspace-write"'),
        ("cancelled", 'approval for escalating to "workspace-write" was cancelled'),
        (
            "unavailable",
            'sandbox escalation to "workspace-write" requires approval, but no approval channel is available',
        ),
        (
            None,
            'sandbox escalation to "workspace-write" requires approval, but no approval channel is available',
        ),
    ],
)
async def test_refusals_execute_nothing(tmp_path: Path, answer: str | None, text: str) -> None:
    _, tools, owner, _ = compose(tmp_path, answer=answer)
    result = await run(tools, owner, args(**ESCALATE))
    assert result.content == f"Error: {text}" and result.is_error
    assert not (tmp_path / "out.txt").exists()
    assert [k for k, _ in audit(owner)] == ["approval/asked", "approval/decided"]


async def test_never_policy_rejects_before_any_answerer(tmp_path: Path) -> None:
    _, tools, owner, asked = compose(tmp_path, policy="never")
    result = await run(tools, owner, args(**ESCALATE))
    assert (
        result.content == 'Error: the user rejected escalating this operation to "workspace-write"'
    )
    assert asked == []
    assert audit(owner)[1][1]["outcome"] == "rejected"


async def test_no_approval_service(tmp_path: Path) -> None:
    _, tools, owner, _ = compose(tmp_path, approval=False, answer=None)
    result = await run(tools, owner, args(**ESCALATE))
    assert result.content == (
        'Error: sandbox escalation to "workspace-write" requires approval, but no approval '
        "service is composed"
    )


async def test_no_agent(tmp_path: Path) -> None:
    _, tools, _, asked = compose(tmp_path)
    result = await run(tools, None, args(**ESCALATE))
    assert result.content == (
        'Error: sandbox escalation to "workspace-write" requires approval, but the call has '
        "no agent to route it through"
    )
    assert asked == []


async def test_denial_hint_follows_the_session_policy(tmp_path: Path) -> None:
    _, tools, owner, _ = compose(tmp_path)
    denied = await run(tools, owner, args())
    assert denied.content.splitlines()[-1] == denial_hint("operation", "read-only", "ask")
    assert 'sandbox_permissions: "workspace-write"' in denied.content
    _, tools, owner, _ = compose(tmp_path, policy="never")
    denied = await run(tools, owner, args())
    assert MARKER in denied.content
    assert denied.content.splitlines()[-1].startswith("Escalation is unavailable in this session")


async def test_bash_escalation_runs_that_command_wider_once(tmp_path: Path) -> None:
    _, tools, owner, asked = compose(tmp_path)
    tools.register(BashTool())
    (tmp_path / "out").mkdir()  # commands never create entries directly in the root
    target = tmp_path / "out" / "made-by-bash.txt"
    command = f"echo hi > {target}"
    raw = json.dumps({"command": command, **ESCALATE})
    result = await tools.execute(owner, "b1", "bash", raw, AbortSignal())  # type: ignore[arg-type]
    assert not result.is_error, result.content
    assert target.read_text() == "hi\n"
    assert [r.reason for r in asked] == ["escalate sandbox to workspace-write: needs the file"]
    target.unlink()
    again = await tools.execute(
        owner, "b2", "bash", json.dumps({"command": command}), AbortSignal()
    )  # type: ignore[arg-type]
    assert again.is_error and MARKER in again.content
    assert (
        'retry this exact command once with sandbox_permissions: "workspace-write"' in again.content
    )
    assert not target.exists()


async def test_bash_rejection_names_the_command_and_hints_are_exact(tmp_path: Path) -> None:
    _, tools, owner, _ = compose(tmp_path, answer="rejected")
    tools.register(BashTool())
    target = tmp_path / "never.txt"
    raw = json.dumps({"command": f"echo x > {target}", **ESCALATE})
    result = await tools.execute(owner, "b1", "bash", raw, AbortSignal())  # type: ignore[arg-type]
    assert result.content == 'Error: the user rejected escalating this command to "workspace-write"'
    assert not target.exists()
    assert denial_hint("command", "read-only", "ask") == (
        "If this command is necessary, retry this exact command once with sandbox_permissions: "
        '"workspace-write" and a justification; the user will be asked to approve it.'
    )
    assert denial_hint("operation", "workspace-write", "ask") == (
        "If this operation is necessary, retry this exact operation once with "
        'sandbox_permissions: "danger-full-access" and a justification; the user will be asked '
        "to approve it."
    )
    assert denial_hint("operation", "read-only", "never") == (
        "Escalation is unavailable in this session (approvals are disabled). Do not retry this "
        "operation with sandbox_permissions; report that it needs wider access than this "
        "session's scope allows."
    )
    assert denial_hint("command", "danger-full-access", "ask") == ""


async def test_an_escalation_cancelled_by_the_calls_abort_is_aborted_before_dispatch(
    tmp_path: Path,
) -> None:
    kernel, tools, owner, _ = compose(tmp_path, answer=None)
    asked = asyncio.Event()

    async def hang(request: Any, _next: Any) -> str:
        asked.set()
        await asyncio.sleep(3600)
        return "allowed-once"

    register_answerer(kernel.ctx, hang)
    signal = AbortSignal()
    pending = asyncio.ensure_future(run(tools, owner, args(**ESCALATE), signal))
    await asked.wait()
    signal.abort("user")
    result = await pending
    assert (result.content, result.details) == (
        "Error: ABORTED_BEFORE_DISPATCH: the call was cancelled before it ran",
        {"cancelled": True},
    )
    assert audit(owner)[1][1]["outcome"] == "cancelled"
    assert not (tmp_path / "out.txt").exists()


async def test_a_refused_escalation_says_whether_it_was_cancelled(tmp_path: Path) -> None:
    _, tools, owner, _ = compose(tmp_path, answer="cancelled")
    cancelled = await run(tools, owner, args(**ESCALATE))
    assert cancelled.details == {"cancelled": True}
    _, tools, owner, _ = compose(tmp_path, answer="rejected")
    rejected = await run(tools, owner, args(**ESCALATE))
    assert rejected.details == {"cancelled": False}
