"""``tool-subagent.spec`` and ``list-agents.spec``: the model-facing
delegation tools, driven through the real tool pipeline by a scripted parent."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from subagent_support import (
    call,
    child,
    hold,
    hold_tool,
    holding,
    plain,
    settle,
    stored,
    stored_headers,
    subagents,
    texts,
    until,
    world,
)

from tether._signals import AbortSignal
from tether.sandbox import SANDBOX_SERVICE, SandboxProvider
from tether.subagents._composition import DEFAULT_MAX_DEPTH
from tether.subagents._oneshot import OneShotRequest, run_one_shot
from tether.subagents._plugin import SubagentsConfig

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def parent_script(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"match": {"depth": 0}, "steps": [*steps, *([{"text": "noted"}] * 4)]}


def delegate(prompt: str = "go", label: str = "task", **extra: Any) -> dict[str, Any]:
    return call("subagent", description=label, prompt=prompt, **extra)


def descriptor_of(events: Any) -> dict[str, Any]:
    return next(plain(e) for e in events if e.type == "subagent/descriptor")


async def test_no_permission_or_provider_parameters_in_the_schema(tmp_path: Path) -> None:
    w = world(tmp_path, [parent_script()])
    subagents(w)
    # Even with a confining sandbox mounted (escalation fields advertised on file tools), the
    # delegation tools expose no scope knob.
    w.ctx.provide(SANDBOX_SERVICE, SandboxProvider())
    schemas = {name: params for name, _, params in w.tools.schemas()}
    assert "sandbox_permissions" in schemas["write"]["properties"]
    for name in ("subagent", "subagent_fork"):
        assert set(schemas[name]["properties"]) == {"description", "prompt", "run_in_background"}
        assert schemas[name]["required"] == ["description", "prompt"]
    assert set(schemas["send_message"]["properties"]) == {"subagent_id", "message"}
    assert set(schemas["interrupt_agent"]["properties"]) == {"agent_id"}
    assert set(schemas["list_agents"]["properties"]) == {"scope"}
    assert "report" not in schemas  # child-scoped only


def test_max_depth_defaults_to_three() -> None:
    assert DEFAULT_MAX_DEPTH == 3
    assert SubagentsConfig().max_depth == 3
    assert [i.name for i in SubagentsConfig().instances] == ["subagent", "subagent_fork"]


async def test_continuable_defaults_to_background_and_returns_the_id(tmp_path: Path) -> None:
    w = world(
        tmp_path,
        [
            parent_script(delegate(), {"text": "started", "expect": "^started subagent "}),
            child([{"text": "child reply"}]),
        ],
    )
    subagents(w)
    parent = w.root()
    result = await parent.run("delegate")
    assert result.output == "started"
    (content,) = texts(parent.session.events)
    match = re.fullmatch(f"started subagent ({UUID})", content)
    assert match is not None
    child_id = match.group(1)
    await settle(w)
    events = (await stored(w, child_id)).events
    assert descriptor_of(events)["mode"] == "continuable"
    assert [str(e.data["content"]) for e in events if e.type == "assistant/message"] == [
        "child reply"
    ]
    notices = [
        e
        for e in parent.session.events
        if e.type == "user/message" and plain(e)["source"]["kind"] == "subagent-settled"
    ]
    assert len(notices) == 1 and plain(notices[0])["source"]["sender_session_id"] == child_id


async def test_explicit_false_runs_in_the_foreground(tmp_path: Path) -> None:
    w = world(
        tmp_path,
        [
            parent_script(
                delegate(run_in_background=False), {"text": "ok", "expect": "child says"}
            ),
            child([{"text": "child says hi"}]),
        ],
    )
    subagents(w)
    parent = w.root()
    result = await parent.run("delegate")
    assert result.output == "ok"
    assert texts(parent.session.events) == ["child says hi"]
    # A foreground child is one-shot: driven to completion inside the call, then disposed.
    children = [h for h in await stored_headers(w) if h.parent_session == parent.id]
    assert len(children) == 1
    assert descriptor_of((await stored(w, children[0].id)).events)["mode"] == "one-shot"
    assert w.store.get(children[0].id) is None and len(w.agents) == 1


async def test_one_shot_instance_refuses_background(tmp_path: Path) -> None:
    w = world(
        tmp_path,
        [parent_script(call("subagent_fork", description="f", prompt="p", run_in_background=True))],
    )
    subagents(w)
    parent = w.root()
    await parent.run("fork")
    assert texts(parent.session.events) == [
        'Error: tool "subagent_fork" runs one-shot subagents in the foreground only'
    ]


async def test_max_tokens_stop_includes_diagnostic_and_partial_output(tmp_path: Path) -> None:
    w = world(
        tmp_path,
        [
            parent_script(delegate(run_in_background=False)),
            child([{"text": "half an ans", "finish": "length"}]),
        ],
    )
    subagents(w)
    parent = w.root()
    await parent.run("delegate")
    result = next(plain(e) for e in parent.session.events if e.type == "tool/result")
    assert result["is_error"] is True
    assert result["content"] == (
        "Error: subagent hit its token limit before finishing\n"
        "Diagnostic: the child run ended max-tokens\n"
        "Partial output: half an ans"
    )


async def test_failed_child_includes_the_sanitized_diagnostic(tmp_path: Path) -> None:
    w = world(
        tmp_path,
        [
            parent_script(delegate(run_in_background=False)),
            child([call("read", path="missing.txt"), {"text": "never", "expect": "^nothing$"}]),
        ],
    )
    subagents(w)
    parent = w.root()
    await parent.run("delegate")
    content = texts(parent.session.events)[0]
    headline, diagnostic = content.split("\n")
    assert headline == "Error: subagent run failed"
    assert diagnostic.startswith("Diagnostic: MODEL_SCRIPT: scripted model <dict>: ")
    assert "expects '^nothing$'" in diagnostic


async def test_depth_error_is_the_tool_result(tmp_path: Path) -> None:
    w = world(tmp_path, [parent_script(delegate())])
    subagents(w, {"max_depth": 0})
    parent = w.root()
    await parent.run("delegate")
    assert texts(parent.session.events) == ["Error: subagent depth 1 exceeds maxDepth 0"]
    assert len(w.store.live()) == 1


async def test_send_message_and_interrupt_agent_tools(tmp_path: Path) -> None:
    w = world(
        tmp_path,
        [
            parent_script(),
            child([hold("c"), {"text": "one"}, {"text": "two"}]),
        ],
    )
    gates = hold_tool(w)
    manager = subagents(w)
    parent = w.root()
    child_id = await manager.start(parent, "task")
    agent = manager.activation(child_id).agent
    await until(lambda: holding(agent), "child holding")
    signal = AbortSignal()
    sent = await w.tools.execute(
        parent,
        "c1",
        "send_message",
        f'{{"subagent_id": "{child_id}", "message": "and then this"}}',
        signal,
    )
    assert (sent.content, sent.is_error) == (
        f"message queued as the next turn for subagent {child_id}",
        False,
    )
    stranger = w.root()
    refused = await w.tools.execute(
        stranger, "c2", "interrupt_agent", f'{{"agent_id": "{child_id}"}}', signal
    )
    assert refused.is_error and refused.content == (
        f"Error: not allowed to interrupt subagent {child_id}"
    )
    accepted = await w.tools.execute(
        parent, "c3", "interrupt_agent", f'{{"agent_id": "{child_id}"}}', signal
    )
    assert accepted.content == f"interrupt accepted for {child_id}"
    await settle(w)
    gates.gate("c").set()
    events = (await stored(w, child_id)).events
    relayed = next(
        e for e in events if e.type == "user/message" and e.data["content"] == "and then this"
    )
    assert plain(relayed)["source"] == {
        "kind": "coordinator",
        "form": "relay",
        "sender_session_id": parent.id,
    }
    assert [e.data["reason"] for e in events if e.type == "turn/end"] == ["aborted", "completed"]
    unknown = await w.tools.execute(
        parent, "c4", "send_message", '{"subagent_id": "nope", "message": "x"}', signal
    )
    assert unknown.content == 'Error: subagent "nope" is unavailable'


async def test_list_agents_shows_continuable_rows_with_status(tmp_path: Path) -> None:
    w = world(
        tmp_path,
        [
            parent_script(),
            child([{"text": "finished"}], label="done"),
            child([hold("run"), {"text": "ran"}], label="busy"),
            child(
                [delegate("deep", label="grand"), {"text": "waiting"}, {"text": "got it"}],
                label="waiter",
            ),
            child([hold("grand"), {"text": "grand done"}], depth=2, label="grand"),
            child([{"text": "one-shot"}], label="once"),
        ],
    )
    gates = hold_tool(w)
    manager = subagents(w)
    parent = w.root()
    ready = await manager.start(parent, "a", label="done")
    await until(lambda: manager.activation(ready) is None and not manager._disposing, "settled")
    await run_one_shot(OneShotRequest(parent, "b", label="once"))  # hidden: one-shot
    busy = await manager.start(parent, "c", label="busy")
    waiter = await manager.start(parent, "d", label="waiter")
    waiting = manager.activation(waiter).agent
    await until(lambda: len(manager.resident()) == 3, "grandchild started")
    grand = next(a.id for a in manager.resident() if a.id not in (busy, waiter))
    await until(
        lambda: (
            holding(manager.activation(busy).agent)
            and "turn/end" in [e.type for e in waiting.session.events]
            and waiting.status == "idle"
        ),
        "busy holding, waiter idle",
    )
    signal = AbortSignal()
    children = await w.tools.execute(parent, "l1", "list_agents", "{}", signal)
    assert sorted(children.content.split("\n")) == sorted(
        [
            f"{ready} done: ready",
            f"{busy} busy: running",
            f"{waiter} waiter: idle",
        ]
    )
    tree = await w.tools.execute(parent, "l2", "list_agents", '{"scope": "descendants"}', signal)
    assert sorted(tree.content.split("\n")) == sorted(
        [
            f"{ready} done: ready (depth 1, parent {parent.id})",
            f"{busy} busy: running (depth 1, parent {parent.id})",
            f"{waiter} waiter: idle (depth 1, parent {parent.id})",
            f"{grand} grand: running (depth 2, parent {waiter})",
        ]
    )
    mine = await w.tools.execute(waiting, "l3", "list_agents", "{}", signal)
    assert mine.content == f"{grand} grand: running"
    gates.gate("run").set()
    gates.gate("grand").set()
    await settle(w)
    after = await w.tools.execute(parent, "l4", "list_agents", "{}", signal)
    assert sorted(after.content.split("\n")) == sorted(
        [
            f"{ready} done: ready",
            f"{busy} busy: ready",
            f"{waiter} waiter: ready",
        ]
    )
    stranger = w.root()
    none = await w.tools.execute(stranger, "l5", "list_agents", "{}", signal)
    assert none.content == "no background subagents"
