"""Golden child logs for the layouts of delegation (``tests/golden/``).

Each test builds a real composition (JSONL persistence, sandbox policy, approval unless the
layout says otherwise, file tools, the subagents plugin, the scripted model), runs one
delegation, and compares the child's *durable* ``session.jsonl`` (header line plus events, as
the JSONL backend wrote it) with ``tests/golden/<name>.jsonl`` after normalisation:

- every UUID becomes ``<id-N>`` in order of first appearance (the child is ``<id-0>``, its
  parent ``<id-1>``), and the scripted model's call ids ``call_<8 hex>_`` follow the session
  they belong to;
- ``time``/``created_at`` become ``0``; ``prompt_tokens`` becomes ``0`` (it counts characters
  of paths and ids);
- the test's temporary directory becomes ``<tmp>``.

Regenerate with ``TETHER_UPDATE_GOLDEN=1 .venv/bin/pytest tests/golden`` and review the diff.
Every test also asserts its layout explicitly, so a careless regeneration cannot bless a wrong
layout.

§1.6 item 6 (*published-run failure*: a child log of exactly one event) has no golden file:
tether cannot produce that layout; see ``test_published_run_failure_layout_is_unreachable``.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tether.policy import SANDBOX_POLICY_SERVICE
from tether.subagents._seams import SUBAGENT_START

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "subagents"))

from subagent_support import World, child, plain, settle, subagents, world, write

from tether.subagents._oneshot import OneShotRequest, run_one_shot

GOLDEN = Path(__file__).parent
UPDATE = os.environ.get("TETHER_UPDATE_GOLDEN") == "1"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
CALL_ID = re.compile(r"call_([0-9a-f]{8})_")
ZEROED = frozenset({"time", "created_at", "prompt_tokens"})


class Normaliser:
    def __init__(self, tmp: Path) -> None:
        self.ids: dict[str, str] = {}
        self.paths = sorted({str(tmp), os.path.realpath(tmp)}, key=len, reverse=True)

    def _id(self, raw: str) -> str:
        return self.ids.setdefault(raw, f"<id-{len(self.ids)}>")

    def text(self, value: str) -> str:
        for path in self.paths:
            value = value.replace(path, "<tmp>")
        value = UUID.sub(lambda m: self._id(m.group(0)), value)
        prefixes = {raw[:8]: name for raw, name in self.ids.items()}
        return CALL_ID.sub(lambda m: f"call_{prefixes.get(m.group(1), m.group(1))}_", value)

    def value(self, value: Any, key: str | None = None) -> Any:
        if key in ZEROED and isinstance(value, int):
            return 0
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {k: self.value(v, k) for k, v in value.items()}
        return value

    def log(self, raw: str) -> str:
        lines = [json.loads(line) for line in raw.splitlines() if line.strip()]
        out = [json.dumps(self.value(line), ensure_ascii=False) for line in lines]
        return "\n".join(out) + "\n"


async def durable_log(w: World, tmp: Path, session_id: str) -> tuple[str, list[dict[str, Any]]]:
    """The child's ``session.jsonl`` normalised, plus its parsed event lines."""
    await settle(w)
    persistence = w.store.persistence
    path = persistence.log_path(session_id)  # type: ignore[union-attr]
    raw = path.read_text()
    lines = [json.loads(line) for line in raw.splitlines()]
    assert lines[0]["type"] == "session" and lines[0]["id"] == session_id
    return Normaliser(tmp).log(raw), lines[1:]


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.jsonl"
    if UPDATE:
        path.write_text(text)
        return
    if not path.exists():
        pytest.fail(f"{path} is missing; run with TETHER_UPDATE_GOLDEN=1 to create it")
    assert text == path.read_text(), f"{path.name} differs (TETHER_UPDATE_GOLDEN=1 regenerates)"


def head(events: list[dict[str, Any]], count: int) -> list[tuple[int, str, dict[str, Any]]]:
    return [(e["seq"], e["type"], e["data"]) for e in events[:count]]


RO = {"mode": "read-only", "source": "delegation"}
NEVER = {"policy": "never", "source": "delegation"}
PARENT = {"match": {"depth": 0}, "steps": [{"text": "parent turn"}] * 6}


async def test_one_shot_spawn_child_read_only_parent(tmp_path: Path) -> None:
    w = world(tmp_path, [PARENT, child([write("c.txt"), {"text": "The write was denied."}])])
    subagents(w)
    parent = w.root(mode="read-only")
    result = await run_one_shot(OneShotRequest(parent, "write c.txt", label="probe"))
    text, events = await durable_log(w, tmp_path, result.child_id)
    assert head(events, 2) == [(0, "sandbox/mode", RO), (1, "approval/policy", NEVER)]
    types = [e["type"] for e in events]
    assert types[2:6] == ["agent/inbox/spliced", "turn/start", "subagent/descriptor", "step/start"]
    assert '"seed_length"' not in text.splitlines()[0]
    check_golden("one_shot_spawn_child", text)


async def test_one_shot_fork_child_unswitched_parent(tmp_path: Path) -> None:
    # No permission-presets plugin is composed, so the unswitched parent has no sandbox/mode.
    w = world(tmp_path, [PARENT, child([{"text": "forked reply"}])])
    subagents(w)
    parent = w.root()
    await parent.run("first turn")
    prefix = len(parent.session)
    result = await run_one_shot(OneShotRequest(parent, "continue", provider="fork"))
    text, events = await durable_log(w, tmp_path, result.child_id)
    assert json.loads(text.splitlines()[0])["seed_length"] == prefix
    assert head(events[prefix:], 2) == [
        (prefix, "session/end-seed", {}),
        (prefix + 1, "approval/policy", NEVER),
    ]
    assert [e["type"] for e in events[prefix + 2 : prefix + 5]] == [
        "agent/inbox/spliced",
        "turn/start",
        "subagent/descriptor",
    ]
    assert events[prefix + 3]["data"] == {"turn": 2}
    assert not any(e["type"] == "sandbox/mode" for e in events)
    check_golden("one_shot_fork_child", text)


async def test_one_shot_fork_with_a_stale_seed(tmp_path: Path) -> None:
    w = world(tmp_path, [PARENT, child([write("f.txt"), {"text": "denied"}])])
    subagents(w)
    sandbox = w.ctx.get(SANDBOX_POLICY_SERVICE)
    parent = w.root()
    sandbox.set_sandbox_mode(parent.session, "workspace-write")
    await parent.run("first turn")
    sandbox.set_sandbox_mode(parent.session, "read-only")
    result = await run_one_shot(OneShotRequest(parent, "write f.txt", provider="fork"))
    text, events = await durable_log(w, tmp_path, result.child_id)
    prefix = json.loads(text.splitlines()[0])["seed_length"]
    assert head(events, 1) == [(0, "sandbox/mode", {"mode": "workspace-write"})]
    assert head(events[prefix:], 3) == [
        (prefix, "session/end-seed", {}),
        (prefix + 1, "sandbox/mode", RO),
        (prefix + 2, "approval/policy", NEVER),
    ]
    assert not (w.workspace / "f.txt").exists()
    check_golden("one_shot_fork_stale_seed", text)


async def test_continuable_spawn_child(tmp_path: Path) -> None:
    w = world(tmp_path, [PARENT, child([write("c.txt"), {"text": "denied"}])])
    manager = subagents(w)
    parent = w.root(mode="read-only")
    child_id = await manager.start(parent, "write c.txt", label="worker")
    text, events = await durable_log(w, tmp_path, child_id)
    assert head(events, 4) == [
        (
            0,
            "subagent/descriptor",
            {"version": 2, "mode": "continuable", "provider": "spawn", "label": "worker"},
        ),
        (1, "session/end-seed", {}),
        (2, "sandbox/mode", RO),
        (3, "approval/policy", NEVER),
    ]
    header = json.loads(text.splitlines()[0])
    assert (header["origin"], header["delegation_depth"]) == ("subagent", 1)
    assert "seed_length" not in header
    # The parent got its settlement notice turn.
    notices = [
        e
        for e in parent.session.events
        if e.type == "user/message" and plain(e)["source"]["kind"] == "subagent-settled"
    ]
    assert len(notices) == 1
    check_golden("continuable_spawn_child", text)


async def test_continuable_fork_child(tmp_path: Path) -> None:
    w = world(tmp_path, [PARENT, child([{"text": "forked and done"}])])
    manager = subagents(w)
    parent = w.root(mode="read-only")
    await parent.run("first turn")
    prefix = len(parent.session)
    child_id = await manager.start(parent, "continue", label="fork", provider="fork")
    text, events = await durable_log(w, tmp_path, child_id)
    assert json.loads(text.splitlines()[0])["seed_length"] == prefix
    assert head(events[prefix:], 5) == [
        (prefix, "session/end-seed", {}),
        (
            prefix + 1,
            "subagent/descriptor",
            {"version": 2, "mode": "continuable", "provider": "fork", "label": "fork"},
        ),
        (prefix + 2, "session/end-seed", {}),
        (prefix + 3, "sandbox/mode", RO),
        (prefix + 4, "approval/policy", NEVER),
    ]
    check_golden("continuable_fork_child", text)


async def test_composition_without_an_approval_service(tmp_path: Path) -> None:
    w = world(tmp_path, [PARENT, child([write("c.txt"), {"text": "CHILD_DENIED"}])], approval=False)
    subagents(w)
    parent = w.root(mode="read-only")
    result = await run_one_shot(OneShotRequest(parent, "write c.txt"))
    assert (result.stop_reason, result.output) == ("completed", "CHILD_DENIED")
    text, events = await durable_log(w, tmp_path, result.child_id)
    assert head(events, 1) == [(0, "sandbox/mode", RO)]
    assert events[1]["type"] == "agent/inbox/spliced"
    assert not any(e["type"] == "approval/policy" for e in events)
    assert not (w.workspace / "c.txt").exists()
    check_golden("no_approval_service_child", text)


async def test_published_run_failure_layout_is_unreachable(tmp_path: Path) -> None:
    """§1.6 item 6 needs a child that is published and whose first followup fails before
    anything else is appended. In tether the one-shot driver publishes the child and queues
    its prompt in the same synchronous stretch (no await in between; the only callbacks there,
    ``subagent/start`` listeners, are contained by ``emit``), and queueing appends the
    ``agent/inbox/spliced`` event before anything can fail. So even a start listener that
    raises leaves the splice and a whole turn behind: this test pins that, instead of a golden
    file that could only be faked."""
    w = world(tmp_path, [PARENT, child([{"text": "ran anyway"}])])
    subagents(w)

    def fail(_lifecycle: object) -> None:
        raise RuntimeError("start listener failed")

    w.ctx.on(SUBAGENT_START, fail)
    parent = w.root()
    result = await run_one_shot(OneShotRequest(parent, "go"))
    _, events = await durable_log(w, tmp_path, result.child_id)
    assert [e["type"] for e in events[:3]] == [
        "approval/policy",
        "agent/inbox/spliced",
        "turn/start",
    ]
    assert result.stop_reason == "completed"
