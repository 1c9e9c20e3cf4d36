"""End to end through the real CLI: a workspace whose ``tether.toml`` loads the hooks plugin
with a Claude Code settings file, trusted with ``tether trust``, and ``tether run --json``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hooks_support import script

from cli_support import TETHER

pytestmark = pytest.mark.timeout(120)


def test_a_settings_file_hook_denies_a_write_in_tether_run(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / ".claude" / "hooks").mkdir(parents=True)
    guard = script(
        workspace / ".claude" / "hooks",
        "guard.sh",
        "#!/bin/sh\ncat >/dev/null\necho 'no writes in CI' >&2\nexit 2\n",
    )
    (workspace / ".claude" / "settings.json").write_text(
        json.dumps(
            {
                "hooks": {
                    "PreToolUse": [
                        {
                            "matcher": "Write|Edit",
                            "hooks": [
                                {
                                    "type": "command",
                                    "command": '"$CLAUDE_PROJECT_DIR"/.claude/hooks/guard.sh',
                                }
                            ],
                        }
                    ]
                }
            }
        )
    )
    assert Path(guard).exists()
    (workspace / "tether.toml").write_text(
        '[[plugins]]\nname = "hooks"\nconfig = { settings_files = [".claude/settings.json"] }\n'
    )
    # The user reviews and trusts the workspace's configuration first (tether.toml and the
    # settings file it lists); without that, the run refuses it.
    trusted = subprocess.run(
        [TETHER, "trust", "--workspace", str(workspace)],
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert trusted.returncode == 0, trusted.stderr
    model = tmp_path / "script.json"
    model.write_text(
        json.dumps(
            {
                "agents": [
                    {
                        "match": {"depth": 0},
                        "steps": [
                            {
                                "tool_calls": [
                                    {
                                        "name": "write",
                                        "arguments": {"path": "out.txt", "content": "x"},
                                    }
                                ]
                            },
                            {"text": "could not write", "expect": "no writes in CI"},
                        ],
                    }
                ]
            }
        )
    )
    run = subprocess.run(
        [
            TETHER,
            "run",
            "write out.txt",
            "--model",
            f"scripted:{model}",
            "--workspace",
            str(workspace),
            "--store",
            f"sqlite:///{tmp_path / 's.db'}",
            "--sandbox",
            "workspace-write",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    lines: list[dict[str, Any]] = [json.loads(line) for line in run.stdout.splitlines()]
    types = [line["type"] for line in lines]
    call_at = types.index("tool/call")
    assert types[call_at : call_at + 4] == [
        "tool/call",
        "hook/invoked",
        "hook/result",
        "tool/result",
    ]
    invoked, result, tool_result = (lines[call_at + i]["data"] for i in (1, 2, 3))
    assert invoked == {
        "turn": 1,
        "point": "PreToolUse",
        "dialect": "claude-code",
        "matcher": "Write|Edit",
        "handler_id": ".claude/settings.json#PreToolUse[0].hooks[0]",
    }
    # Exit 2 is recorded as Claude Code's own word for it; the call is denied all the same.
    assert (result["decision"], result["exit_code"], result["stderr_summary"]) == (
        "block",
        2,
        "no writes in CI",
    )
    assert (tool_result["content"], tool_result["is_error"]) == ("Error: no writes in CI", True)
    assert lines[-1]["type"] == "run/result"
    assert lines[-1]["output"] == "could not write"
    assert not (workspace / "out.txt").exists()
