"""One gated ``bash`` call along the path ``docs/design.md`` §3 walks: the model's tool call,
the ``PRE_EXECUTE`` gate that asks, the approval service's audit pair and answerers, the guards,
the confined command and ``POST_EXECUTE``, in that order."""

from __future__ import annotations

from pathlib import Path

import pytest

from script_support import call, script
from tether import Harness
from tether.kernel import Next
from tether.policy import SandboxMode
from tether.policy._approval import ApprovalRequest
from tether.tools._base import PostDecision, PreDecision, ToolCall, ToolResult
from tether.tools._seams import POST_EXECUTE, PRE_EXECUTE, TOOL_GUARD

pytestmark = pytest.mark.timeout(60)

MARKER = "[sandbox: file access denied under workspace-write mode]"


async def test_a_gated_bash_call_takes_the_walked_path(ws: Path, tmp_path: Path) -> None:
    outside = ws.parent / "outside" / "touched.txt"
    command = f"echo walked > src/walked.txt; touch {outside}"
    model = script(
        tmp_path / "script.json",
        [call("bash", command=command), {"text": "done"}],
    )
    passed: list[str] = []
    seen: list[ToolResult] = []
    policies: list[SandboxMode | None] = []

    async def approver(request: ApprovalRequest) -> str:
        passed.append(f"approval/request {request.tool_name}")
        return "allowed-once"

    async def before_the_gate(c: ToolCall, next_: Next[PreDecision]) -> PreDecision:
        decision = await next_()
        passed.append(f"pre-execute {c.name}: {decision.kind}")
        return decision

    def guard(c: ToolCall) -> str | None:
        passed.append(f"guard {c.name}")
        return None

    async def after(item: tuple[ToolCall, ToolResult], next_: Next[PostDecision]) -> PostDecision:
        c, result = item
        passed.append(f"post-execute {c.name}")
        policies.append(c.policy.mode if c.policy is not None else None)
        seen.append(result)
        return await next_()

    async with Harness.open(
        workspace=ws,
        model=f"scripted:{model}",
        store=f"sqlite:///{tmp_path / 'walk.db'}",
        sandbox="workspace-write",
        approval="ask",
        approver=approver,
        plugins=["ask_tools"],
    ) as harness:
        harness.ctx.on(PRE_EXECUTE, before_the_gate, prepend=True)
        harness.ctx.on(TOOL_GUARD, guard)
        harness.ctx.on(POST_EXECUTE, after)
        result = await harness.run("run it")
        session = harness.store.get(result.session_id)
        assert session is not None
        types = [event.type for event in session.events]

    assert result.stop_reason == "completed"
    # The gate asked, then the approval service's answerers ran, then the guards; post-execute
    # saw the command's result.
    assert passed == [
        "pre-execute bash: ask",
        "approval/request bash",
        "guard bash",
        "post-execute bash",
    ]
    walked = {"tool/call", "approval/asked", "approval/decided", "tool/result"}
    assert [t for t in types if t in walked] == [
        "tool/call",
        "approval/asked",
        "approval/decided",
        "tool/result",
    ]
    # The body ran under the policy resolved for the call, confined by the sandbox: the write
    # inside the workspace happened, the one outside it was denied.
    assert policies == [SandboxMode.WORKSPACE_WRITE]
    assert (ws / "src" / "walked.txt").read_text() == "walked\n"
    assert not outside.exists()
    assert MARKER in seen[0].content
