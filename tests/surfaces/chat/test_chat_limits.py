"""A chat input is one run: at ``max_turns`` the queued work is dropped and chat says so."""

from __future__ import annotations

from pathlib import Path

from chat_support import call, open_chat, root_steps

from compose_support import FollowUpTool
from tether._harness import Harness


def with_follow_up(harness: Harness) -> None:
    harness.tools.register(FollowUpTool())


async def test_chat_says_when_an_input_reached_its_turn_limit(tmp_path: Path) -> None:
    agents = [
        root_steps(
            {"tool_calls": [call("follow_up")]},
            {"text": "first reply"},
            {"text": "after the next input"},
        )
    ]
    async with open_chat(tmp_path, agents, plugins=(), setup=with_follow_up, max_turns=1) as chat:
        chat.type("go\r")
        shown = await chat.wait_for("── ")
        chat.type("again\r")
        await chat.wait_for("after the next input\n")
        await chat.wait_for("── ")
        await chat.quit()
    assert (
        "■ the run reached its limit of 1 turns; 1 queued input was not run (raise it with "
        "--max-turns, or max_turns in tether.toml)\n"
    ) in shown
    assert "first reply" in shown
