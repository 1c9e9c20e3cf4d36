"""The hooks plugin's event payloads (``plugins/hooks/_events.py``): ``hook/invoked`` and
``hook/result`` read back, key for key, what real hook processes made the service write, and
a payload that does not fit is refused with its exact message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hooks_support import compose, group, script, write_call

from tether.plugins.hooks._events import HookInvoked, HookResult, InvalidHookEventError
from tether.plugins.hooks._settings import HookEvent
from tether.session import JsonObject
from tether.session._json import thaw


async def test_the_stored_hook_records_read_back_key_for_key(tmp_path: Path) -> None:
    lint = script(
        tmp_path, "lint.sh", "#!/bin/sh\ncat >/dev/null\necho 'lint failed' >&2\nexit 2\n"
    )
    quiet = script(tmp_path, "quiet.sh", "#!/bin/sh\ncat >/dev/null\n")
    rig = compose(
        tmp_path,
        {"PreToolUse": [group(quiet)], "PostToolUse": [group(lint, "Write")]},
        [write_call(), {"text": "ok", "expect": "lint failed"}],
    )
    await rig.agent.run("write")
    read: list[HookInvoked | HookResult] = []
    for event in rig.events(HookInvoked.TYPE, HookResult.TYPE):
        definition = HookInvoked if event.type == HookInvoked.TYPE else HookResult
        record = definition.from_data(event.data)
        assert json.dumps(thaw(record.to_data())) == json.dumps(thaw(event.data))
        read.append(record)
    invoked = [r for r in read if isinstance(r, HookInvoked)]
    results = [r for r in read if isinstance(r, HookResult)]
    assert [(r.point, r.matcher) for r in invoked] == [
        (HookEvent.PRE_TOOL_USE, None),
        (HookEvent.POST_TOOL_USE, "Write"),
    ]
    assert [(r.point, r.decision, r.exit_code, r.stderr_summary) for r in results] == [
        (HookEvent.PRE_TOOL_USE, "none", 0, None),
        (HookEvent.POST_TOOL_USE, "block", 2, "lint failed"),
    ]


def test_a_cancelled_result_has_no_exit_code() -> None:
    cancelled = HookResult(2, HookEvent.STOP, "h1", "cancelled", 15)
    assert json.dumps(cancelled.to_data()) == json.dumps(
        {"turn": 2, "point": "Stop", "handler_id": "h1", "decision": "cancelled", "duration_ms": 15}
    )
    assert HookResult.from_data(cancelled.to_data()) == cancelled


REFUSALS: list[tuple[type[HookInvoked | HookResult], JsonObject, str]] = [
    (
        HookInvoked,
        {"turn": 1, "point": "PreToolUse", "dialect": "gemini", "handler_id": "h"},
        "hook/invoked payload: dialect 'gemini' is not a hook dialect "
        "(accepted: claude-code, codex)",
    ),
    (
        HookInvoked,
        {"turn": 1, "point": "OnBoot", "dialect": "claude-code", "handler_id": "h"},
        "hook/invoked payload: point 'OnBoot' is not a hook event (accepted: PreToolUse, "
        "PostToolUse, UserPromptSubmit, Stop, SubagentStart, SubagentStop, SessionStart)",
    ),
    (
        HookResult,
        {"turn": 1, "point": "Stop", "handler_id": "h", "decision": "maybe", "duration_ms": 1},
        "hook/result payload: decision 'maybe' is not a hook decision (accepted: allow, ask, "
        "block, cancelled, deny, error, invalid-output, none, timeout)",
    ),
    (
        HookResult,
        {"turn": 1, "point": "Stop", "handler_id": "h", "decision": "none", "duration_ms": "1"},
        "hook/result payload: 'duration_ms' must be an integer, got '1'",
    ),
]


@pytest.mark.parametrize(("definition", "data", "message"), REFUSALS)
def test_a_hook_record_that_does_not_fit_is_refused(
    definition: type[HookInvoked | HookResult], data: JsonObject, message: str
) -> None:
    with pytest.raises(InvalidHookEventError) as info:
        definition.from_data(data)
    assert info.value.code == "INVALID_HOOK_EVENT"
    assert str(info.value) == message
