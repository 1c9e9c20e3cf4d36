"""The shared end-to-end helpers of ``e2e_support``."""

from __future__ import annotations

import json
import subprocess

from e2e_support import JsonRun


def test_json_run_groups_lines_by_session() -> None:
    lines = [
        {"session": "r", "seq": 0, "type": "sandbox/mode", "data": {"mode": "read-only"}},
        {"session": "c", "seq": 0, "type": "tool/call", "data": {"name": "write"}},
        {"session": "c", "seq": 1, "type": "approval/asked", "data": {"id": "a"}},
        {"session": "c", "seq": 2, "type": "step/end", "data": {}},
        {"type": "run/result", "session": "r", "stop_reason": "completed"},
    ]
    out = "\n".join(json.dumps(line) for line in lines) + "\n"
    run = JsonRun(subprocess.CompletedProcess(["tether"], 0, out, ""))
    assert (run.root, run.children()) == ("r", ["c"])
    assert run.kinds("c") == ["tool/call", "approval/asked", "step/end"]
    assert run.audit("c") == [("tool/call", {"name": "write"}), ("approval/asked", {"id": "a"})]
    assert run.policy("r") == [("sandbox/mode", {"mode": "read-only"})]
    assert run.of_type("c", "step/end") == [{}]
    assert run.result["stop_reason"] == "completed" and len(run.lines) == 4
