"""The ``--approver CMD`` answerer: a hanging, crashing or confused program is unavailable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tether import Harness
from tether.kernel import PluginEntry

SCRIPT = {
    "agents": [
        {
            "steps": [
                {"tool_calls": [{"name": "write", "arguments": {"path": "a.txt", "content": "a"}}]},
                {"text": "done"},
            ]
        }
    ]
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("command", "outcome"),
    [
        ("sleep 30", "unavailable"),  # killed at the timeout
        ("sh -c 'echo allowed-once; exit 3'", "unavailable"),  # non-zero exit
        ("/no/such/approver", "unavailable"),  # cannot start
        ("echo allowed-once", "allowed-once"),
        ('echo \'{"outcome": "rejected"}\'', "rejected"),
    ],
)
async def test_approver_outcomes(tmp_path: Path, command: str, outcome: str) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps(SCRIPT))
    async with Harness.open(
        workspace=tmp_path,
        model=f"scripted:{script}",
        store=f"sqlite:///{tmp_path / 's.db'}",
        plugins=[
            PluginEntry(
                name="approver_command", config={"command": command, "timeout_seconds": 0.5}
            ),
            PluginEntry(name="ask_tools", config={"tools": ["write"]}),
        ],
    ) as harness:
        result = await harness.run("go")
        assert harness.root is not None
        decided = [e.data for e in harness.root.session.events if e.type == "approval/decided"]
    assert result.stop_reason == "completed"
    assert [d["outcome"] for d in decided] == [outcome]
    assert (tmp_path / "a.txt").exists() is (outcome == "allowed-once")


FLOOD = "python3 -c 'import sys; sys.stdout.write(\"y\" * 10_000_000)'"


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("command", "failure", "described"),
    [
        (
            "sh -c 'echo no way >&2; exit 1'",
            {"kind": "exit-status", "exit_code": 1, "excerpt": "no way"},
            "exited with status 1: no way",
        ),
        (
            "echo 'yes please \x1b[31m'",
            {"kind": "invalid-output", "excerpt": "yes please \\x1b[31m"},
            "printed something that is not an answer: yes please \\x1b[31m",
        ),
        (
            "python3 -c \"print('[' * 30000)\"",
            {"kind": "invalid-output", "excerpt": "[" * 200},
            f"printed something that is not an answer: {'[' * 200}",
        ),
        (
            'echo \'{"outcome": "maybe"}\'',
            {"kind": "unknown-outcome", "excerpt": '{"outcome": "maybe"}'},
            'answered an unknown outcome: {"outcome": "maybe"}',
        ),
        (
            FLOOD,
            {"kind": "too-much-output", "excerpt": "y" * 200},
            f"printed more output than an answer can be: {'y' * 200}",
        ),
        ("sh -c 'kill -9 $$'", {"kind": "killed", "exit_code": 9}, "was killed by signal 9"),
        ("sleep 30", {"kind": "timeout"}, "did not answer in time and was stopped"),
        (
            "/no/such/approver",
            {
                "kind": "not-started",
                "excerpt": "[Errno 2] No such file or directory: '/no/such/approver'",
            },
            "could not be started: [Errno 2] No such file or directory: '/no/such/approver'",
        ),
    ],
    ids=[
        "exit-1",
        "garbage",
        "nested",
        "unknown-outcome",
        "10-MB",
        "killed",
        "timeout",
        "not-started",
    ],
)
async def test_a_failed_approver_says_why_in_the_audit_pair_and_to_the_model(
    tmp_path: Path,
    command: str,
    failure: dict[str, object],
    described: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps(SCRIPT))
    async with Harness.open(
        workspace=tmp_path,
        model=f"scripted:{script}",
        store=f"sqlite:///{tmp_path / 's.db'}",
        plugins=[
            # Only the timeout case may run into its timeout: a loaded machine can take seconds
            # to start the others.
            PluginEntry(
                name="approver_command",
                config={"command": command, "timeout_seconds": 1 if command == "sleep 30" else 30},
            ),
            PluginEntry(name="ask_tools", config={"tools": ["write"]}),
        ],
    ) as harness:
        result = await harness.run("go")
        assert harness.root is not None
        events = harness.root.session.events
    assert result.stop_reason == "completed"
    [decided] = [dict(e.data) for e in events if e.type == "approval/decided"]
    assert decided.pop("failure") == failure
    assert decided["outcome"] == "unavailable"
    [tool_result] = [e.data for e in events if e.type == "tool/result"]
    assert tool_result["content"] == (
        f'Error: tool "write" requires approval, but the configured approver {described}, so '
        "it is unavailable"
    )
    assert [r.getMessage() for r in caplog.records if r.name.endswith("approver_command")] == [
        f"tether: the configured approver {described}; the ask is unavailable"
    ]
    assert not (tmp_path / "a.txt").exists()


@pytest.mark.timeout(60)
async def test_a_failed_approver_of_an_escalation_says_why(tmp_path: Path) -> None:
    """The escalation ladder words the failure as the tool pipeline does: the configured
    approver failed, not "no approval channel"."""
    outside = tmp_path / "outside.txt"
    script = tmp_path / "s.json"
    call = {
        "name": "bash",
        "arguments": {
            "command": f"echo x > {outside}",
            "sandbox_permissions": "danger-full-access",
            "justification": "write outside",
        },
    }
    script.write_text(json.dumps({"agents": [{"steps": [{"tool_calls": [call]}, {"text": "ok"}]}]}))
    async with Harness.open(
        workspace=tmp_path / "ws",
        model=f"scripted:{script}",
        store=f"sqlite:///{tmp_path / 's.db'}",
        sandbox="read-only",
        approval="ask",
        plugins=[
            PluginEntry(
                name="approver_command",
                config={"command": "sh -c 'echo no way >&2; exit 1'", "timeout_seconds": 30},
            ),
        ],
    ) as harness:
        await harness.run("go")
        assert harness.root is not None
        events = harness.root.session.events
    [decided] = [e.data for e in events if e.type == "approval/decided"]
    assert decided["outcome"] == "unavailable"
    assert decided["failure"] == {"kind": "exit-status", "exit_code": 1, "excerpt": "no way"}
    [result] = [e.data for e in events if e.type == "tool/result"]
    assert result["content"] == (
        'Error: sandbox escalation to "danger-full-access" requires approval, but the '
        "configured approver exited with status 1: no way, so it is unavailable"
    )
    assert not outside.exists()
