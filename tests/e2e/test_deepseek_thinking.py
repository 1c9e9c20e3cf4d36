"""A real agent against a strict DeepSeek thinking-mode server (``model/strict_servers.py``):
reasoning is kept on every assistant message with tool calls, durably in ``assistant/message``,
and sent back in every later request, a resumed session's too; ``thinking`` and
``reasoning_effort`` come from the user's configuration."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from e2e_support import write_user_config

from model.strict_servers import DEEPSEEK_MISSING_REASONING, Answer, DeepSeekServer
from tether import Harness

pytestmark = pytest.mark.timeout(60)


def read(call_id: str, path: str) -> tuple[str, str, str]:
    return (call_id, "read", json.dumps({"path": path}))


@pytest.fixture
async def deepseek() -> AsyncIterator[DeepSeekServer]:
    server = DeepSeekServer(
        Answer(reasoning="Read a.txt first.", calls=(read("call_a", "a.txt"),)),
        Answer(reasoning="", calls=(read("call_b", "b.txt"),)),
        Answer(reasoning="Both are read.", text="a says alpha, b says beta."),
        Answer(reasoning="Nothing to read.", text="Still alpha and beta."),
    )
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def env_for(server: DeepSeekServer) -> dict[str, str]:
    return {**os.environ, "DEEPSEEK_API_KEY": "sk-ds", "DEEPSEEK_BASE_URL": server.base_url}


def assistant_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] == "assistant"]


async def test_a_thinking_tool_loop_of_three_requests_then_a_resumed_turn(
    ws: Path, deepseek: DeepSeekServer
) -> None:
    (ws / "a.txt").write_text("alpha\n")
    (ws / "b.txt").write_text("beta\n")
    write_user_config(
        '[model]\ndefault = "thinker"\n\n[models.thinker]\nmodel = "deepseek:deepseek-chat"\n'
        'thinking = "enabled"\nreasoning_effort = "high"\n'
    )
    store = f"sqlite:///{ws.parent / 'store.db'}"
    env = env_for(deepseek)
    async with Harness.open(workspace=ws, store=store, env=env) as harness:
        result = await harness.run("What do a.txt and b.txt say?")
        assert (result.stop_reason, result.output) == ("completed", "a says alpha, b says beta.")
        replies = [
            e.data
            for e in harness.store.get(result.session_id).events
            if e.type == "assistant/message"
        ]
    assert [(r["reasoning"], r["finish_reason"]) for r in replies] == [
        ("Read a.txt first.", "tool_calls"),
        ("", "tool_calls"),
        ("Both are read.", "stop"),
    ]
    assert len(deepseek.requests) == 3
    first, second, third = (r.body for r in deepseek.requests)
    assert (first["thinking"], first["reasoning_effort"]) == ({"type": "enabled"}, "high")
    assert [m.get("reasoning_content") for m in assistant_messages(second)] == ["Read a.txt first."]
    assert [m.get("reasoning_content") for m in assistant_messages(third)] == [
        "Read a.txt first.",
        "",
    ]
    tools = [m["content"] for m in third["messages"] if m["role"] == "tool"]
    assert tools == ["alpha\n", "beta\n"]  # the real files, read by the real tool

    # Cold resume: the reasoning comes back from the log; the earlier turn's final answer,
    # which made no tool call, goes without its reasoning (DeepSeek ignores it).
    async with Harness.open(workspace=ws, store=store, env=env) as harness:
        again = await harness.run("And now?", resume=result.session_id)
    assert (again.stop_reason, again.output) == ("completed", "Still alpha and beta.")
    fourth = deepseek.requests[3].body
    assert [
        (m.get("reasoning_content"), bool(m.get("tool_calls"))) for m in assistant_messages(fourth)
    ] == [("Read a.txt first.", True), ("", True), (None, False)]


async def test_without_reasoning_sent_back_the_run_ends_with_deepseeks_400(
    ws: Path, deepseek: DeepSeekServer
) -> None:
    (ws / "a.txt").write_text("alpha\n")
    write_user_config('[models.plain]\nmodel = "deepseek:deepseek-chat"\nsend_reasoning = false\n')
    store = f"sqlite:///{ws.parent / 'store.db'}"
    async with Harness.open(
        workspace=ws, model="plain", store=store, env=env_for(deepseek)
    ) as harness:
        result = await harness.run("What does a.txt say?")
    assert result.stop_reason == "error"
    assert result.error is not None and result.error.endswith(
        f"rejected the request (HTTP 400): {DEEPSEEK_MISSING_REASONING}"
    )
    assert len(deepseek.requests) == 2  # the 400 was not retried
