"""``tether sessions tree`` over a real delegated run, and the ``ask_user`` guard."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli_support import tether
from tether._harness import Harness
from tether.tools._ask_user import DELEGATED_CALLER, USER_QUESTION

pytestmark = pytest.mark.timeout(120)

SCRIPT = {
    "agents": [
        {
            "match": {"depth": 0},
            "steps": [
                {
                    "tool_calls": [
                        {
                            "name": "subagent",
                            "arguments": {"description": "reader", "prompt": "look"},
                        }
                    ]
                },
                {"text": "waiting"},
                {"text": "done", "expect": "finished"},
            ],
        },
        {
            "match": {"depth": 1, "label": "reader"},
            "steps": [
                {"tool_calls": [{"name": "ask_user", "arguments": {"question": "which file?"}}]},
                {"text": "could not ask", "expect": "DELEGATED_CALLER"},
            ],
        },
    ]
}


def test_tree_shows_each_childs_recorded_scope(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = tmp_path / "s.json"
    script.write_text(json.dumps(SCRIPT))
    store = f"sqlite:///{tmp_path / 's.db'}"
    run = tether(
        "run",
        "--model",
        f"scripted:{script}",
        "--workspace",
        str(workspace),
        "--store",
        store,
        "--sandbox",
        "read-only",
        "--json",
        "go",
    )
    assert run.returncode == 0, run.stderr
    root = json.loads(run.stdout.splitlines()[-1])["session"]
    tree = tether("sessions", "tree", root, "--store", store, "--json")
    assert tree.returncode == 0, tree.stderr
    node = json.loads(tree.stdout)
    assert (node["id"], node["kind"], node["depth"], node["mode"], node["approval"]) == (
        root,
        "root",
        0,
        "read-only",
        "ask",
    )
    [child] = node["children"]
    assert (child["kind"], child["label"], child["depth"]) == ("continuable", "reader", 1)
    assert (child["mode"], child["mode_source"]) == ("read-only", "delegation")
    assert (child["approval"], child["approval_source"]) == ("never", "delegation")
    assert child["status"] == "completed"
    text = tether("sessions", "tree", root, "--store", store)
    lines = text.stdout.splitlines()
    assert lines[0].startswith(f"{root}  root  depth 0  mode read-only  approval ask")
    assert lines[1].startswith(
        f"└── {child['id']} [reader]  continuable  depth 1  mode read-only (delegation)"
    )
    missing = tether("sessions", "tree", "nope", "--store", store)
    assert missing.returncode == 1 and "SESSION_NOT_FOUND" in missing.stderr


async def test_ask_user_reaches_the_human_only_from_a_root(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(
        json.dumps(
            {
                "agents": [
                    {
                        "match": {"depth": 0},
                        "steps": [
                            {
                                "tool_calls": [
                                    {"name": "ask_user", "arguments": {"question": "which file?"}}
                                ]
                            },
                            {
                                "tool_calls": [
                                    {
                                        "name": "subagent",
                                        "arguments": {
                                            "description": "reader",
                                            "prompt": "ask",
                                            "run_in_background": False,
                                        },
                                    }
                                ]
                            },
                            {"text": "ok", "expect": "could not ask"},
                        ],
                    },
                    {
                        "match": {"depth": 1},
                        "steps": [
                            {
                                "tool_calls": [
                                    {"name": "ask_user", "arguments": {"question": "may I?"}}
                                ]
                            },
                            {"text": "could not ask", "expect": "DELEGATED_CALLER"},
                        ],
                    },
                ]
            }
        )
    )
    asked: list[str] = []
    async with Harness.open(
        workspace=tmp_path, model=f"scripted:{script}", store=f"sqlite:///{tmp_path / 'h.db'}"
    ) as harness:

        def answer(request: Any, _next: Any) -> str:
            asked.append(request.question)
            return "notes.txt"

        harness.ctx.on(USER_QUESTION, answer)
        result = await harness.run("start")
        root = harness.root
        assert root is not None
        results = [e.data["content"] for e in root.session.events if e.type == "tool/result"]
    assert result.stop_reason == "completed"
    assert asked == ["which file?"]
    assert results[0] == "notes.txt"
    assert results[1] == "could not ask"
    assert DELEGATED_CALLER.startswith("DELEGATED_CALLER")
