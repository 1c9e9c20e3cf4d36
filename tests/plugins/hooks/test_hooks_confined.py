"""Hook commands run confined under the session's sandbox mode (issue 4 item 4)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from compose_support import compose_kernel
from tether.agent import Agent
from tether.agent._agent import AgentOptions
from tether.kernel._config import resolve_plugin
from tether.model import ScriptedModel
from tether.tools.fs import file_tools


async def run_with_hook(tmp_path: Path, hook: str, mode: str) -> Agent:
    workspace = tmp_path / "ws"
    (workspace / "src").mkdir(parents=True)  # commands write below the root, not in it
    rig = compose_kernel(workspace, mode=mode, tools=file_tools(), provide_tools=True, agents=True)
    kernel = rig.kernel
    kernel.load(resolve_plugin("sandbox"))
    kernel.load(
        resolve_plugin("hooks"),
        {
            "hooks": {
                "PreToolUse": [
                    {"matcher": "Write", "hooks": [{"type": "command", "command": hook}]}
                ]
            }
        },
    )
    model = ScriptedModel.from_dict(
        {
            "agents": [
                {
                    "steps": [
                        {
                            "tool_calls": [
                                {"name": "write", "arguments": {"path": "a.txt", "content": "a"}}
                            ]
                        },
                        {"text": "done"},
                    ]
                }
            ]
        }
    )
    agent = Agent(kernel.ctx, rig.session(), AgentOptions(model), tools=rig.tools)
    await agent.run("write")
    return agent


async def test_a_hook_cannot_write_outside_the_workspace(tmp_path: Path) -> None:
    outside = Path("/var/tmp") / f"tether-hook-{tmp_path.name}.txt"
    outside.unlink(missing_ok=True)
    inside = tmp_path / "ws" / "src" / "hook-was-here.txt"
    hook = f"echo escaped > {outside}; echo ok > {inside}; exit 0"
    agent = await run_with_hook(tmp_path, hook, "workspace-write")
    try:
        assert not outside.exists()
        assert inside.read_text() == "ok\n"  # the workspace itself stays writable
        results = [dict(e.data) for e in agent.session.events if e.type == "hook/result"]
        assert [r["decision"] for r in results] == ["none"]
    finally:
        outside.unlink(missing_ok=True)


async def test_a_hook_under_read_only_cannot_write_at_all(tmp_path: Path) -> None:
    inside = tmp_path / "ws" / "src" / "hook-was-here.txt"
    agent = await run_with_hook(tmp_path, f"echo ok > {inside} || exit 0", "read-only")
    assert not inside.exists()
    results = [
        json.loads(json.dumps(dict(e.data)))
        for e in agent.session.events
        if e.type == "hook/result"
    ]
    assert len(results) == 1


async def test_a_hook_cannot_plant_a_codex_hook_file(tmp_path: Path) -> None:
    # .codex/ is a control path like .claude/: Codex runs its hooks outside any sandbox.
    (tmp_path / "ws" / ".codex").mkdir(parents=True)
    planted = tmp_path / "ws" / ".codex" / "hooks.json"
    agent = await run_with_hook(tmp_path, f"echo '{{}}' > {planted} || exit 0", "workspace-write")
    assert not planted.exists()
    assert [e.data["decision"] for e in agent.session.events if e.type == "hook/result"] == ["none"]


async def test_a_hook_script_the_sandbox_hides_is_named_not_exit_127(tmp_path: Path) -> None:
    secret = Path(os.environ["HOME"]) / ".ssh"
    secret.mkdir(parents=True)
    script = secret / "hook.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755)
    agent = await run_with_hook(tmp_path, str(script), "workspace-write")
    [result] = [e.data for e in agent.session.events if e.type == "hook/result"]
    assert result["decision"] == "error"
    assert result["exit_code"] in (126, 127)
    [tool_result] = [e.data for e in agent.session.events if e.type == "tool/result"]

    assert tool_result["content"] == (
        f"Error: PreToolUse hook {result['handler_id']} failed (the sandbox hides {script} from "
        f"hook commands (it lies in the hidden path {secret}), so the command could not run "
        "it; keep hook scripts and their interpreters outside hidden paths); denied because "
        "hooks fail closed"
    )
