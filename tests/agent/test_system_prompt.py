"""tether's own system prompt: its sections, identical for a parent and its child, tool guides
only while their tool is composed, and the user's replacement or addition from the Python API
and from ``tether.toml`` (under workspace trust)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli_support import sqlite_store
from script_support import call, script
from tether import Harness
from tether.agent import Agent
from tether.agent._agent import AgentOptions
from tether.agent._system_prompt import (
    BUILT_IN_GUIDES,
    PERMISSIONS_TEXT,
    REFUSALS_TEXT,
    REPLIES_TEXT,
    ROLE_TEXT,
    plugin,
)
from tether.kernel import SESSIONS_SERVICE, WorkspaceTrust, WorkspaceUntrustedError
from tether.kernel._config import ConfigFileError
from tether.kernel._plugin import Kernel
from tether.model import ScriptedModel
from tether.session import Session, SessionMeta, SessionStore
from tether.subagents._plugin import DELEGATION_GUIDE
from tether.subagents._plugin import plugin as subagents_plugin
from tether.tools._pipeline import TOOLS_SERVICE, ToolRuntime
from tether.tools.fs import ReadTool

TETHER_PROMPT = "\n\n".join(
    [
        ROLE_TEXT,
        *(guide.text for guide in BUILT_IN_GUIDES),
        DELEGATION_GUIDE,
        PERMISSIONS_TEXT,
        REFUSALS_TEXT,
        REPLIES_TEXT,
    ]
)
"""What a harness with the default plugins sends: every built-in tool and the subagents'."""


def headers(session: Session) -> list[dict[str, Any]]:
    return [dict(e.data["header"]) for e in session.events if e.type == "request/header"]  # type: ignore[arg-type]


async def test_a_parent_and_its_child_send_the_same_tether_prompt(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    model = tmp_path / "script.json"
    model.write_text(
        json.dumps(
            {
                "agents": [
                    {
                        "match": {"depth": 0},
                        "steps": [
                            call(
                                "subagent",
                                prompt="look around",
                                description="probe",
                                run_in_background=False,
                            ),
                            {"text": "parent done"},
                        ],
                    },
                    {"match": {"depth": 1}, "steps": [{"text": "child done"}]},
                ]
            }
        )
    )
    async with Harness.open(
        workspace=workspace, model=f"scripted:{model}", store=sqlite_store(tmp_path)
    ) as harness:
        result = await harness.run("delegate")
        assert result.stop_reason == "completed", result.error
        parent = harness.store.get(result.session_id)
        assert parent is not None
        listed = await harness.store.persistence.list()  # type: ignore[union-attr]
        child = await harness.store.inspect(next(m.id for m in listed if m.id != parent.id))
    parent_headers, child_headers = headers(parent), headers(child)
    assert [h["system"] for h in parent_headers] == [TETHER_PROMPT]
    assert [h["system"] for h in child_headers] == [TETHER_PROMPT]
    # The delegation statement stays in the child's runtime context, not in its prompt.
    snapshot = next(
        e
        for e in child.events
        if e.type == "user/message" and e.data["source"].get("form") == "snapshot"  # type: ignore[union-attr]
    )
    assert "You are a delegated subagent" in str(snapshot.data["content"])
    assert "You are a delegated subagent" not in TETHER_PROMPT


def composed(tmp_path: Path, tools: list[Any]) -> tuple[Kernel, Agent]:
    kernel = Kernel()
    store = SessionStore()
    kernel.ctx.provide(SESSIONS_SERVICE, store)
    runtime = ToolRuntime(kernel.ctx)
    kernel.ctx.provide(TOOLS_SERVICE, runtime)
    kernel.load(plugin, {})
    for tool in tools:
        runtime.register(tool)
    session = store.create(meta=SessionMeta(cwd=str(tmp_path)))
    model = ScriptedModel.from_dict({"agents": [{"match": {}, "steps": [{"text": "ok"}] * 3}]})
    return kernel, Agent(kernel.ctx, session, AgentOptions(model), tools=runtime)


async def test_a_tool_guide_is_sent_only_while_its_tool_is_composed(tmp_path: Path) -> None:
    kernel, agent = composed(tmp_path, [ReadTool()])
    read_guide = next(g.text for g in BUILT_IN_GUIDES if g.tool == "read")
    await agent.run("one")
    assert headers(agent.session)[-1]["system"] == "\n\n".join(
        [ROLE_TEXT, read_guide, PERMISSIONS_TEXT, REFUSALS_TEXT, REPLIES_TEXT]
    )
    handle = kernel.load(subagents_plugin, {})
    await agent.run("two")
    assert DELEGATION_GUIDE in headers(agent.session)[-1]["system"]
    assert "bash runs one command line" not in headers(agent.session)[-1]["system"]
    handle.dispose()
    await agent.run("three")
    assert headers(agent.session)[-1]["system"] == headers(agent.session)[0]["system"]
    assert [
        h["reason"] for h in (e.data for e in agent.session.events if e.type == "request/header")
    ] == ["initial", "change", "change"]  # type: ignore[union-attr]


async def test_the_python_api_replaces_and_extends_the_prompt(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    model = script(tmp_path / "script.json", [{"text": "ok"}])
    async with Harness.open(
        workspace=workspace,
        model=f"scripted:{model}",
        store=sqlite_store(tmp_path),
        system_prompt="You review Go code.",
        append_system_prompt="Answer in French.",
    ) as harness:
        result = await harness.run("hi")
        session = harness.store.get(result.session_id)
    assert session is not None
    # A replacement is the whole prompt: no tether section, no tool guide (not the subagents').
    assert headers(session)[0]["system"] == "You review Go code.\n\nAnswer in French."


async def test_appending_keeps_tethers_prompt_first(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    model = script(tmp_path / "script.json", [{"text": "ok"}])
    async with Harness.open(
        workspace=workspace,
        model=f"scripted:{model}",
        store=sqlite_store(tmp_path),
        append_system_prompt="Answer in French.",
    ) as harness:
        result = await harness.run("hi")
        session = harness.store.get(result.session_id)
    assert session is not None
    assert headers(session)[0]["system"] == TETHER_PROMPT + "\n\nAnswer in French."


def toml_workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    (workspace / "prompts").mkdir(parents=True)
    (workspace / "prompts" / "system.md").write_text("You are the release bot.\n")
    (workspace / "tether.toml").write_text(
        '[agent]\nsystem_prompt_file = "prompts/system.md"\nappend_system_prompt = "Be terse."\n'
    )
    return workspace


async def test_tether_toml_sets_the_prompt_only_once_trusted(tmp_path: Path) -> None:
    workspace = toml_workspace(tmp_path)
    model = script(tmp_path / "script.json", [{"text": "ok"}])
    with pytest.raises(WorkspaceUntrustedError) as refused:
        async with Harness.open(
            workspace=workspace, model=f"scripted:{model}", store=sqlite_store(tmp_path)
        ):
            pass
    # The prompt file is part of what the user trusts, beside tether.toml.
    assert [(key, str(status)) for key, status in refused.value.files] == [
        ("tether.toml", "new"),
        ("prompts/system.md", "new"),
    ]
    async with Harness.open(
        workspace=workspace,
        model=f"scripted:{model}",
        store=sqlite_store(tmp_path),
        workspace_trust=WorkspaceTrust.ONCE,
    ) as harness:
        result = await harness.run("hi")
        session = harness.store.get(result.session_id)
    assert session is not None
    assert headers(session)[0]["system"] == "You are the release bot.\n\n\nBe terse."


async def test_a_caller_value_wins_over_tether_toml(tmp_path: Path) -> None:
    workspace = toml_workspace(tmp_path)
    model = script(tmp_path / "script.json", [{"text": "ok"}])
    async with Harness.open(
        workspace=workspace,
        model=f"scripted:{model}",
        store=sqlite_store(tmp_path),
        workspace_trust=WorkspaceTrust.ONCE,
        system_prompt="Mine.",
    ) as harness:
        result = await harness.run("hi")
        session = harness.store.get(result.session_id)
    assert session is not None
    assert headers(session)[0]["system"] == "Mine.\n\nBe terse."


async def test_a_missing_prompt_file_fails_closed_before_anything_runs(tmp_path: Path) -> None:
    workspace = toml_workspace(tmp_path)
    (workspace / "prompts" / "system.md").unlink()
    with pytest.raises(ConfigFileError) as refused:
        async with Harness.open(
            workspace=workspace,
            model="scripted:/nonexistent.json",
            store=sqlite_store(tmp_path),
            workspace_trust=WorkspaceTrust.ONCE,
        ):
            pass
    assert str(refused.value) == "[agent] system_prompt_file prompts/system.md: no such file"
    assert not (tmp_path / "store.db").exists()
