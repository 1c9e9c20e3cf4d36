"""The subagents layer's event payload (``subagents/_events.py``): the ``subagent/descriptor``
definition reads back, key for key, what the real delegation writes, and its lenient reader
reads a descriptor it does not know as none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from subagent_support import child, settle, stored, subagents, world

from tether.session import Event, JsonObject
from tether.session._json import thaw
from tether.subagents._descriptor import fold_descriptor
from tether.subagents._events import Descriptor, ToolFilter
from tether.subagents._lineage import status_of
from tether.subagents._results import result_from_events
from tether.subagents._visibility import last_denial, pending_from_log

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
PARENT = {"match": {"depth": 0}, "steps": [{"text": "noted"}] * 4}


def stored_descriptors(events: Any) -> list[Event]:
    return [e for e in events if e.type == Descriptor.TYPE]


def test_every_golden_descriptor_reads_back_key_for_key() -> None:
    # The golden child logs are what the real one-shot, continuable and fork paths write
    # (tests/golden holds them byte-identical).
    seen = set()
    for path in sorted(GOLDEN.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            raw = json.loads(line)
            if raw.get("type") != Descriptor.TYPE:
                continue
            read = Descriptor.parse(Event.from_dict(raw).data)
            assert read is not None, path.name
            assert json.dumps(read.to_data()) == json.dumps(raw["data"]), path.name
            seen.add((read.mode, read.provider))
    assert seen == {
        ("one-shot", "spawn"),
        ("one-shot", "fork"),
        ("continuable", "spawn"),
        ("continuable", "fork"),
    }


async def test_a_continuable_childs_descriptor_keeps_its_persona_and_filter(
    tmp_path: Path,
) -> None:
    w = world(tmp_path, [PARENT, child([{"text": "first"}])])
    manager = subagents(w)
    child_id = await manager.start(
        w.root(), "review", label="rev", persona="Careful.", tool_filter=ToolFilter(("read",))
    )
    await settle(w)
    [event] = stored_descriptors((await stored(w, child_id)).events)
    expected = Descriptor("continuable", "spawn", "rev", "Careful.", ToolFilter(("read",)))
    assert Descriptor.parse(event.data) == expected
    assert json.dumps(thaw(expected.to_data())) == json.dumps(thaw(event.data))


@pytest.mark.parametrize(
    "data",
    [
        {"version": 1, "mode": "one-shot", "provider": "spawn"},
        {"version": 2, "mode": "daemon", "provider": "spawn"},
        {"version": 2, "mode": "one-shot", "provider": 3},
        {"version": 2, "mode": "one-shot", "provider": "spawn", "label": 1},
        {"version": 2, "mode": "one-shot", "provider": "spawn", "colour": "red"},
    ],
)
def test_a_descriptor_it_does_not_know_is_no_descriptor(data: JsonObject) -> None:
    assert Descriptor.parse(data) is None
    events = [Event.make(Descriptor.TYPE, 0, 0, data)]
    assert fold_descriptor(events, 0) is None


def test_the_views_read_malformed_agent_and_policy_events_without_failing() -> None:
    events = [
        Event.make("turn/start", 0, 0, {"turn": 1}),
        Event.make("assistant/message", 1, 0, {"content": "partial"}, surface_op="append"),
        Event.make(
            "tool/result",
            2,
            0,
            {"call_id": "c", "name": 5, "content": "Error: the user rejected it", "is_error": 1},
            surface_op="append",
        ),
        Event.make("approval/pending", 3, 0, {"id": "q", "state": "pending", "lineage": "c"}),
        Event.make("turn/end", 4, 0, {"turn": 1, "reason": "done"}),
    ]
    # A turn/end the status cannot read is shown as "ended", as one without a reason.
    assert status_of(events) == "ended"
    assert last_denial(events) == "denied: 5 (the user rejected it)"
    # A routed question whose record does not fit shows nothing (the approval service reads
    # the log strictly).
    assert pending_from_log(events) == []
    result = result_from_events("child", events)
    assert (result.stop_reason, result.output) == ("error", "partial")
    assert result.diagnostic == "the child run ended error"
