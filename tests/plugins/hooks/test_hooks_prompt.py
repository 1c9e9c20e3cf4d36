"""A blocked ``UserPromptSubmit`` rejects the prompt before any turn opens: the log holds no
turn, no prompt and no hook record for it; an accepted one is recorded inside its turn."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from hooks_support import compose, group, normalized, py_hook

from cli_support import TETHER
from event_support import kinds

pytestmark = pytest.mark.timeout(120)

GUARD = (
    "prompt = json.load(sys.stdin)['prompt']\n"
    "if 'password' in prompt:\n"
    "    print('prompts must not contain secrets', file=sys.stderr)\n"
    "    sys.exit(2)\n"
)


async def test_a_blocked_prompt_opens_no_turn(tmp_path: Path) -> None:
    rig = compose(
        tmp_path,
        {"UserPromptSubmit": [group(py_hook(tmp_path, "guard.py", GUARD))]},
        [{"text": "never asked"}],
    )
    before = kinds(rig.session)
    result = await rig.agent.run("my password is hunter2")
    assert (result.turn, result.stop_reason, result.output, result.error) == (
        1,
        "blocked",
        "",
        "a UserPromptSubmit hook blocked the prompt: prompts must not contain secrets",
    )
    # Only the queueing of the prompt (a splice, without its text): no turn, no user/message,
    # no hook records.
    assert kinds(rig.session) == [*before, "agent/inbox/spliced"]
    assert all(not t.startswith(("turn/", "hook/", "user/")) for t in before)


async def test_an_accepted_prompt_records_its_hook_inside_the_turn(tmp_path: Path) -> None:
    rig = compose(
        tmp_path,
        {"UserPromptSubmit": [group(py_hook(tmp_path, "guard.py", GUARD))]},
        [{"text": "hi"}],
    )
    await rig.agent.run("hello")
    types = rig.layout()
    start = types.index("turn/start")
    assert types[start : start + 4] == ["turn/start", "hook/invoked", "hook/result", "step/start"]
    assert [normalized(e) for e in rig.events("hook/result")] == [
        {
            "turn": 1,
            "point": "UserPromptSubmit",
            "handler_id": "tether.toml#UserPromptSubmit[0].hooks[0]",
            "decision": "none",
            "exit_code": 0,
            "duration_ms": "<ms>",
        }
    ]


def test_tether_run_with_a_blocked_prompt_logs_only_the_header(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / ".claude").mkdir(parents=True)
    guard = workspace / ".claude" / "guard.py"
    guard.write_text("import json, sys\n" + GUARD)
    (workspace / ".claude" / "settings.json").write_text(
        json.dumps(
            {
                "hooks": {
                    "UserPromptSubmit": [
                        {"hooks": [{"type": "command", "command": f"python3 {guard}"}]}
                    ]
                }
            }
        )
    )
    (workspace / "tether.toml").write_text(
        '[[plugins]]\nname = "hooks"\nconfig = { settings_files = [".claude/settings.json"] }\n'
    )
    model = tmp_path / "script.json"
    model.write_text(json.dumps({"agents": [{"match": {}, "steps": [{"text": "never"}]}]}))
    run = subprocess.run(
        [
            TETHER,
            "run",
            "my password is hunter2",
            "--model",
            f"scripted:{model}",
            "--workspace",
            str(workspace),
            "--store",
            f"sqlite:///{tmp_path / 's.db'}",
            "--trust-workspace",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    types = [line["type"] for line in lines]
    assert types[-2:] == ["agent/inbox/spliced", "run/result"]
    assert not any(t.startswith(("turn/", "step/", "user/", "hook/")) for t in types)
    assert "hunter2" not in run.stdout  # the rejected prompt is never logged
    assert {k: v for k, v in lines[-1].items() if k not in ("session", "duration_ms")} == {
        "type": "run/result",
        "stop_reason": "blocked",
        "output": "",
        "error": "a UserPromptSubmit hook blocked the prompt: prompts must not contain secrets",
        "usage": {"input_tokens": 0, "output_tokens": 0},  # no model request was made
        "num_turns": 0,
    }
    assert run.stderr.splitlines()[-1] == (
        "tether: run: the turn ended blocked: a UserPromptSubmit hook blocked the prompt: "
        "prompts must not contain secrets"
    )
    assert run.returncode == 1
