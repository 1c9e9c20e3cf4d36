"""``max_steps`` per turn and ``max_turns`` per run, from the Python API and ``tether.toml``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cli_support import sqlite_store
from compose_support import FollowUpTool
from script_support import call, script
from tether import Harness
from tether._harness import InvalidLimitError
from tether.kernel import WorkspaceTrust

STEPS_DETAIL = (
    "the turn reached its limit of 2 steps and stopped before step 3 "
    "(raise it with --max-steps, or max_steps in tether.toml)"
)


def looping(tmp_path: Path, count: int) -> Path:
    return script(tmp_path / "script.json", [call("ls", path=".") for _ in range(count)])


def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir(exist_ok=True)
    return path


async def test_max_steps_ends_the_turn_max_steps(tmp_path: Path) -> None:
    model = looping(tmp_path, 5)
    async with Harness.open(
        workspace=workspace(tmp_path),
        model=f"scripted:{model}",
        store=sqlite_store(tmp_path),
        max_steps=2,
    ) as harness:
        result = await harness.run("loop")
        session = harness.store.get(result.session_id)
    assert (result.stop_reason, result.error) == ("max-steps", STEPS_DETAIL)
    assert session is not None
    assert [dict(e.data) for e in session.events if e.type == "turn/end"] == [
        {"turn": 1, "reason": "max-steps", "detail": STEPS_DETAIL}
    ]
    assert len([e for e in session.events if e.type == "tool/call"]) == 2


async def test_tether_toml_sets_the_limits_and_the_caller_overrides_them(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    (ws / "tether.toml").write_text("[agent]\nmax_steps = 2\n")
    model = looping(tmp_path, 5)
    async with Harness.open(
        workspace=ws,
        model=f"scripted:{model}",
        store=sqlite_store(tmp_path),
        workspace_trust=WorkspaceTrust.ONCE,
    ) as harness:
        assert (await harness.run("loop")).error == STEPS_DETAIL
    async with Harness.open(
        workspace=ws,
        model=f"scripted:{model}",
        store=sqlite_store(tmp_path),
        workspace_trust=WorkspaceTrust.ONCE,
        max_steps=1,
    ) as harness:
        assert (await harness.run("loop")).error == (
            "the turn reached its limit of 1 steps and stopped before step 2 "
            "(raise it with --max-steps, or max_steps in tether.toml)"
        )


async def test_max_turns_ends_a_run_that_keeps_queueing_turns(tmp_path: Path) -> None:
    steps: list[dict[str, Any]] = []
    for turn in range(4):
        steps += [call("follow_up"), {"text": f"turn {turn + 1} done"}]
    model = script(tmp_path / "script.json", steps)
    async with Harness.open(
        workspace=workspace(tmp_path),
        model=f"scripted:{model}",
        store=sqlite_store(tmp_path),
        max_turns=2,
    ) as harness:
        harness.tools.register(FollowUpTool())
        result = await harness.run("start")
        session = harness.store.get(result.session_id)
        assert session is not None
        assert harness.root is not None and not harness.root.inbox.has_work()
        # The next run has a budget of its own.
        again = await harness.run("once more")
    assert (result.stop_reason, result.output, result.error) == (
        "max-turns",
        "turn 2 done",
        "the run reached its limit of 2 turns; 1 queued input was not run (raise it with "
        "--max-turns, or max_turns in tether.toml)",
    )
    assert [e.data["reason"] for e in session.events if e.type == "turn/end"] == [
        "completed",
        "completed",
        "completed",
        "completed",
    ]
    assert again.stop_reason == "max-turns"
    splices = [dict(e.data) for e in session.events if e.type == "agent/inbox/spliced"]
    assert {"target": "next-turn", "start": 0, "removed_count": 1} in splices


async def test_a_run_within_its_turn_limit_completes(tmp_path: Path) -> None:
    model = script(tmp_path / "script.json", [call("follow_up"), {"text": "a"}, {"text": "b"}])
    async with Harness.open(
        workspace=workspace(tmp_path),
        model=f"scripted:{model}",
        store=sqlite_store(tmp_path),
        max_turns=2,
    ) as harness:
        harness.tools.register(FollowUpTool())
        result = await harness.run("start")
    assert (result.stop_reason, result.output, result.error) == ("completed", "b", None)


@pytest.mark.parametrize(
    ("option", "value"), [("max_steps", 0), ("max_turns", -1), ("max_steps", True)]
)
async def test_a_limit_below_one_is_refused(tmp_path: Path, option: str, value: Any) -> None:
    with pytest.raises(InvalidLimitError) as refused:
        async with Harness.open(
            workspace=workspace(tmp_path),
            model="scripted:/none.json",
            store=sqlite_store(tmp_path),
            **{option: value},
        ):
            pass
    assert refused.value.code == "INVALID_LIMIT"
    assert str(refused.value) == f"{option} must be a whole number of at least 1, got {value!r}"
