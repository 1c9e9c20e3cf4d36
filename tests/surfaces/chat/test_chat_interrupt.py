"""Ctrl-C cancels the turn and the session goes on; twice quits; Ctrl-D quits."""

from __future__ import annotations

import asyncio
from pathlib import Path

from chat_support import call, events_of, open_chat, root_steps, stored_events

from tether._harness import Harness
from tether.tools._base import ToolArgs, ToolCall, ToolResult


class WaitArgs(ToolArgs):
    pass


class WaitTool:
    """A tool that runs until its call is cancelled."""

    name = "wait"
    description = "Wait until cancelled."
    Args = WaitArgs

    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def run(self, call: ToolCall) -> ToolResult:
        self.started.set()
        await asyncio.Event().wait()
        return ToolResult("never")


def with_wait_tool(tool: WaitTool):  # type: ignore[no-untyped-def]
    def setup(harness: Harness) -> None:
        harness.tools.register(tool)

    return setup


async def test_ctrl_c_at_an_open_approval_cancels_the_turn_and_the_session_goes_on(
    tmp_path: Path,
) -> None:
    agents = [
        root_steps(
            {"tool_calls": [call("write", path="t.txt", content="t")]},
            {"text": "after the cancel"},
        )
    ]
    async with open_chat(tmp_path, agents) as chat:
        root = chat.app.root.id
        chat.type("go\r")
        await chat.wait_for("Reject (default) > ")
        chat.type("\x03")
        ended = await chat.turn_end()
        events = await stored_events(chat.harness, root)
        again = await chat.turn("go on")
        await chat.quit()
    assert ended.splitlines()[1:5] == [
        "cancelling the turn · press Ctrl-C again within 2s to quit",
        "  ✘ cancelled",
        "  → Error: ABORTED_BEFORE_DISPATCH: the call was cancelled before it ran",
        "■ turn 1 aborted (user)",
    ]
    assert "approvals: 1 asked, 0 granted, 1 denied" in ended
    decided = [d for t, d in events if t == "approval/decided"]
    assert [d["outcome"] for d in decided] == ["cancelled"]
    assert [d for t, d in events if t == "turn/end"] == [
        {"turn": 1, "reason": "aborted", "cause": "user"}
    ]
    assert again.splitlines()[0] == "after the cancel"
    assert not (chat.workspace / "t.txt").exists()


async def test_ctrl_c_cancels_a_running_tool(tmp_path: Path) -> None:
    tool = WaitTool()
    agents = [root_steps({"tool_calls": [call("wait")]}, {"text": "still here"})]
    async with open_chat(tmp_path, agents, plugins=(), setup=with_wait_tool(tool)) as chat:
        root = chat.app.root.id
        chat.type("wait\r")
        await asyncio.wait_for(tool.started.wait(), 20)
        chat.type("\x03")
        ended = await chat.turn_end()
        again = await chat.turn("and now")
        ends = [d for t, d in events_of(chat.harness, root) if t == "turn/end"]
        await chat.quit()
    assert ended.splitlines()[1:4] == [
        "cancelling the turn · press Ctrl-C again within 2s to quit",
        '  → Error: tool "wait" was cancelled',
        "■ turn 1 aborted (user)",
    ]
    assert again.splitlines()[0] == "still here"
    assert ends == [
        {"turn": 1, "reason": "aborted", "cause": "user"},
        {"turn": 2, "reason": "completed"},
    ]


async def test_ctrl_c_twice_within_two_seconds_quits_while_a_child_still_runs(
    tmp_path: Path,
) -> None:
    tool = WaitTool()
    now = [100.0]
    agents = [
        root_steps(
            {"tool_calls": [call("subagent", description="bg", prompt="Wait.")]},
            {"text": "Started bg.", "expect": "started subagent"},
        ),
        {"match": {"depth": 1}, "steps": [{"tool_calls": [call("wait")]}]},
    ]
    async with open_chat(
        tmp_path, agents, plugins=(), setup=with_wait_tool(tool), clock=lambda: now[0]
    ) as chat:
        chat.type("go\r")
        await asyncio.wait_for(tool.started.wait(), 20)
        await chat.wait_for("│ [bg] ⚙ wait\n")
        await chat.wait_for("Started bg.\n")
        status = chat.app._busy_text()[-1][1]
        chat.type("\x03")
        await chat.wait_for("within 2s to quit\n")
        now[0] += 5  # too late to count as a double press: cancels again, no quit
        chat.type("\x03")
        await chat.wait_for("within 2s to quit\n")
        assert not chat.task.done()
        now[0] += 1.5
        chat.type("\x03")
        await chat.wait_for("quitting\n")
        await asyncio.wait_for(chat.task, 20)
    assert status == "⠋ 0.0s · working · children: bg running (wait) · Ctrl-C cancels"
    assert chat.app.quitting
    assert "continue with: tether chat --resume" in chat.transcript


async def test_ctrl_d_quits_and_names_the_session(tmp_path: Path) -> None:
    async with open_chat(tmp_path, [root_steps({"text": "hi"})]) as chat:
        root = chat.app.root.id
        await chat.quit()
    assert chat.since_mark() == (
        f"session {root} is stored; continue with: tether chat --resume {root}\n"
    )


async def test_ctrl_c_clears_a_typed_line_and_quits_at_an_empty_prompt(tmp_path: Path) -> None:
    async with open_chat(tmp_path, [root_steps({"text": "hi"})]) as chat:
        chat.type("half a thought\x03")
        shown = await chat.turn("say hi")
        assert shown.splitlines()[0] == "hi"
        assert not chat.task.done()
        user_messages = [
            d["content"]
            for t, d in events_of(chat.harness, chat.app.root.id)
            if t == "user/message"
        ]
        chat.type("\x03")
        await asyncio.wait_for(chat.task, 20)
    assert "say hi" in user_messages
    assert not any("half a thought" in str(m) for m in user_messages)


async def test_input_closed_mid_turn_stops_the_turn_and_quits(tmp_path: Path) -> None:
    tool = WaitTool()
    agents = [root_steps({"tool_calls": [call("wait")]})]
    async with open_chat(tmp_path, agents, plugins=(), setup=with_wait_tool(tool)) as chat:
        root = chat.app.root.id
        chat.type("wait\r")
        await asyncio.wait_for(tool.started.wait(), 20)
        chat.pipe.close()
        shown = await chat.wait_for("stopping the turn\n")
        await asyncio.wait_for(chat.task, 20)
        await chat.app.root.when_idle()
        ends = [d for t, d in events_of(chat.harness, root) if t == "turn/end"]
    assert shown.endswith("input closed; stopping the turn\n")
    assert ends == [{"turn": 1, "reason": "aborted", "cause": "user"}]
    assert chat.app.quitting


async def test_ctrl_c_while_the_agent_asks_a_question_cancels_it(tmp_path: Path) -> None:
    agents = [
        root_steps({"tool_calls": [call("ask_user", question="Which colour?")]}, {"text": "ok"})
    ]
    async with open_chat(tmp_path, agents, plugins=()) as chat:
        chat.type("ask\r")
        await chat.wait_for("press Enter > ")
        chat.type("half an answ\x03")
        ended = await chat.turn_end()
        assert chat.app.approvals.current_text is None
        again = await chat.turn("go on")
        await chat.quit()
    lines = ended.splitlines()
    assert lines[1:3] == [
        "cancelling the turn · press Ctrl-C again within 2s to quit",
        "  ✘ cancelled",
    ]
    assert "■ turn 1 aborted (user)" in lines
    assert again.splitlines()[0] == "ok"
