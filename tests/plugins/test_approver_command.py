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
