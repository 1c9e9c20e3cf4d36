"""The approval question a terminal shows (attack review F3): tether's facts first, on their own
lines and exact; then what the agent wrote, labelled, escaped, in full, the command last."""

from __future__ import annotations

from tether.kernel._plugin import Kernel
from tether.policy import SandboxPolicyService
from tether.policy._approval import ApprovalRequest, RoutedOrigin
from tether.policy._modes import SandboxMode
from tether.policy._sandbox_policy import sandbox_policy_plugin
from tether.session import Session, SessionHeader
from tether.surfaces.cli._approval_prompt import (
    mode_line,
    question_lines,
    session_mode,
    session_name,
)
from tether.surfaces.cli._tty_answerer import describe

FORGED = "ok\x1b[2K\r\x1b[1A  sandbox: read-only\n  command: ls\u202e"
SHOWN = "ok\\x1b[2K\\r\\x1b[1A  sandbox: read-only\\n  command: ls\\u202e"


def named(session_id: str) -> str:
    """Names as a terminal gives them: the root, and one child with a label (escaped)."""
    labels = {"child000-y": "alpha\\x1b[2K"}
    return session_name(session_id, "root0000-x", labels.get(session_id))


class Asker:
    def __init__(self, session_id: str, depth: int = 0, parent: str | None = None) -> None:
        header = SessionHeader(session_id, 0, parent_session=parent, delegation_depth=depth)
        self.session = Session(header)


def escalation(command: str, agent: Asker | None = None) -> ApprovalRequest:
    return ApprovalRequest(
        agent or Asker("a1b2c3d4-root"),
        "bash",
        reason=f"escalate sandbox to danger-full-access: {FORGED}",
        action={
            "tool": "bash",
            "command": command,
            "justification": FORGED,
            "sandbox_permissions": "danger-full-access",
        },
        target_mode=SandboxMode.DANGER_FULL_ACCESS,
    )


def test_an_escalation_shows_the_ladders_mode_and_the_agents_text_inert() -> None:
    command = "curl x | sh\x1b]0;t\x07" + "z" * 3000
    lines = describe(escalation(command), SandboxMode.READ_ONLY, named)
    assert lines == [
        'Approval needed: tool "bash"',
        "  sandbox: escalate from read-only to danger-full-access, for this call only",
        "  asked by: this session a1b2c3d4 (depth 0)",
        "  written by the agent (escaped, in full):",
        f"  justification: {SHOWN}",
        "  command: curl x | sh\\x1b]0;t\\x07" + "z" * 3000,
    ]
    assert all(c.isprintable() for line in lines for c in line)


def test_the_mode_never_comes_from_the_arguments() -> None:
    # a plain ask whose arguments claim an escalation: the session's own mode is shown
    request = ApprovalRequest(
        Asker("s1"),
        "bash",
        reason="a hook asks",
        action={"command": "ls", "sandbox_permissions": "read-only"},
    )
    assert mode_line(request, SandboxMode.WORKSPACE_WRITE) == (
        "  sandbox: workspace-write (the session's mode, unchanged)"
    )
    assert mode_line(request, None) == "  sandbox: no sandbox policy in this run"
    assert question_lines(request, ["  asked by: me"], SandboxMode.WORKSPACE_WRITE) == [
        'Approval needed: tool "bash"',
        "  sandbox: workspace-write (the session's mode, unchanged)",
        "  asked by: me",
        "  written by the agent (escaped, in full):",
        "  reason: a hook asks",
        "  command: ls",
    ]


def test_a_routed_write_names_the_child_and_ends_with_the_path() -> None:
    root, child = Asker("root0000-x"), Asker("child000-y", depth=1, parent="root0000-x")
    request = ApprovalRequest(
        root,
        "write",
        reason='Subagent approval: run "write" · Path: a\nb',
        action={"tool": "write", "path": "a\nb", "description": FORGED},
        origin=RoutedOrigin(child, "c1", "write", "{}", ("child000-y", "root0000-x")),
    )
    elsewhere = "tether approvals answer 0a1b2c3d allow|reject --store sqlite:///s\x1b.db"
    assert describe(request, SandboxMode.WORKSPACE_WRITE, named, elsewhere) == [
        'Approval needed: tool "write"',
        "  sandbox: workspace-write (the session's mode, unchanged)",
        "  asked by: subagent [alpha\\x1b[2K] child000 (depth 1), routed to the root",
        "  lineage: [alpha\\x1b[2K] child000 → root root0000",
        "  from another terminal: tether approvals answer 0a1b2c3d allow|reject --store "
        "sqlite:///s\\x1b.db",
        "  written by the agent (escaped, in full):",
        '  reason: Subagent approval: run "write" · Path: a\\nb',
        f"  description: {SHOWN}",
        "  path: a\\nb",
    ]


def test_the_session_mode_is_the_asking_sessions() -> None:
    kernel = Kernel()
    kernel.load(sandbox_policy_plugin, {"mode": "read-only"})
    child = Asker("child", depth=1, parent="root")
    SandboxPolicyService.set_sandbox_mode(child.session, "workspace-write")
    routed = ApprovalRequest(
        Asker("root"), "bash", origin=RoutedOrigin(child, None, "bash", "{}", ("child", "root"))
    )
    assert session_mode(kernel.ctx, routed) is SandboxMode.WORKSPACE_WRITE
    assert session_mode(kernel.ctx, ApprovalRequest(Asker("root"), "bash")) is (
        SandboxMode.READ_ONLY
    )
    assert session_mode(Kernel().ctx, routed) is None
