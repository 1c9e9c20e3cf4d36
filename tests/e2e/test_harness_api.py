"""The Python front door (ARCHITECTURE.md §4): ``Harness.open``, ``run``, ``stream``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from script_support import script as script_file
from tether import Harness
from tether.session.lease import SessionLiveError


def script(tmp_path: Path, steps: list[dict[str, Any]]) -> str:
    """The model spec of a one-entry script in ``tmp_path``."""
    return f"scripted:{script_file(tmp_path / 's.json', steps)}"


async def test_run_then_stream_on_the_same_root(tmp_path: Path) -> None:
    asked: list[str] = []

    async def approver(request: Any) -> str:
        asked.append(request.tool_name)
        return "allowed-once" if request.tool_name == "write" else "rejected"

    model = script(
        tmp_path,
        [
            {"tool_calls": [{"name": "write", "arguments": {"path": "a.txt", "content": "a"}}]},
            {"text": "first done"},
            {"text": "second done"},
        ],
    )
    async with Harness.open(
        workspace=tmp_path,
        model=model,
        store=f"sqlite:///{tmp_path / 'h.db'}",
        sandbox="read-only",
        approval="ask",
        approver=approver,
        plugins=["ask_tools"],
    ) as harness:
        result = await harness.run("write a.txt")
        assert (result.stop_reason, result.output) == ("completed", "first done")
        # the write was approved but the session is read-only: the sandbox still denies it
        assert asked == ["write"] and not (tmp_path / "a.txt").exists()
        streamed = [item async for item in harness.stream("again")]
    assert {item.session_id for item in streamed} == {result.session_id}
    kinds = [item.event.type for item in streamed]
    assert kinds[0] == "agent/inbox/spliced" and kinds[-1] == "turn/end"
    assert streamed[-1].event.data == {"turn": 2, "reason": "completed"}
    assert [item.event.seq for item in streamed] == sorted(item.event.seq for item in streamed)


async def test_two_harnesses_never_run_the_same_session(tmp_path: Path) -> None:
    model = script(tmp_path, [{"text": "one"}, {"text": "two"}])
    store = f"sqlite:///{tmp_path / 'h.db'}"
    async with Harness.open(workspace=tmp_path, model=model, store=store) as first:
        result = await first.run("hello")
        async with Harness.open(workspace=tmp_path, model=model, store=store) as second:
            with pytest.raises(SessionLiveError) as refused:
                await second.run("again", resume=result.session_id)
            assert str(refused.value) == (
                f"session {result.session_id!r} is live in process {os.getpid()}"
            )
    # Once the first harness is closed, the session is free to resume.
    async with Harness.open(workspace=tmp_path, model=model, store=store) as third:
        again = await third.run("again", resume=result.session_id)
    assert again.session_id == result.session_id
