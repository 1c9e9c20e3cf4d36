"""``continuation.spec`` subset: the continuation manager.

Admission, reservation, persistence, depth; descriptor and persona on resume; followup routing
(enqueue, wake, cold resume) and its authorization; settlement notices; interrupt authority;
report relay; child-first drain.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from subagent_support import (
    World,
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
    write,
)

from tether._signals import AbortSignal
from tether.agent import Agent
from tether.agent._agent import AgentOptions
from tether.subagents import SubagentError, ToolFilter
from tether.subagents._composition import SubagentDepthError
from tether.subagents._continuation import AncestorAuthority, UserAuthority
from tether.subagents._oneshot import OneShotRequest, run_one_shot
from tether.subagents._seams import SUBAGENT_END

PARENT = {"match": {"depth": 0}, "steps": [{"text": "noted"}] * 8}
FINISHED = "finished and will do no further work unless you send it more."


def types(events: Any) -> list[str]:
    return [e.type for e in events]


def user_messages(events: Any, kind: str) -> list[Any]:
    return [
        e for e in events if e.type == "user/message" and plain(e)["source"].get("kind") == kind
    ]


def ended(w: World) -> asyncio.Event:
    """Set whenever a continuable child's residency ends (``subagent/end``)."""
    flag = asyncio.Event()
    w.ctx.on(SUBAGENT_END, lambda _payload: flag.set())
    return flag


# -- start: admission, reservation, persistence, depth -------------------------------------------


async def test_start_returns_the_id_at_inbox_acceptance(tmp_path: Path) -> None:
    w = world(tmp_path, [PARENT, child([{"text": "done"}])])
    manager = subagents(w)
    parent = w.root()
    child_id = await manager.start(parent, "task", label="probe")
    session = w.store.get(child_id)
    assert session is not None
    assert types(session.events)[-1] == "agent/inbox/spliced"
    assert "turn/start" not in types(session.events)
    assert manager.activation(child_id) is not None
    assert w.agents.get(child_id) is not None
    await settle(w)
    assert manager.activation(child_id) is None and w.agents.get(child_id) is None


async def test_duplicate_reservation_is_rejected_live_and_stored(tmp_path: Path) -> None:
    w = world(tmp_path, [PARENT, child([{"text": "done"}])])
    manager = subagents(w)
    parent = w.root()
    assert await manager.start(parent, "task", child_id="kid") == "kid"
    with pytest.raises(SubagentError, match="already exists") as live:
        await manager.start(parent, "again", child_id="kid")
    assert live.value.code == "DUPLICATE_CHILD"
    await settle(w)
    with pytest.raises(SubagentError) as durable:
        await manager.start(parent, "again", child_id="kid")
    assert durable.value.code == "DUPLICATE_CHILD"
    # The rejected starts left the stored child untouched.
    assert types((await stored(w, "kid")).events).count("agent/inbox/spliced") == 1


async def test_concurrent_starts_with_one_id_reserve_it_once(tmp_path: Path) -> None:
    w = world(tmp_path, [PARENT, child([{"text": "done"}])])
    manager = subagents(w)
    parent = w.root()
    # Both starts pass the synchronous checks, then await the store; the second must still
    # see the first's reservation afterwards.
    results: list[str | BaseException] = await asyncio.gather(
        manager.start(parent, "a", child_id="kid"),
        manager.start(parent, "b", child_id="kid"),
        return_exceptions=True,
    )
    first, second = results
    assert first == "kid"
    assert isinstance(second, SubagentError) and second.code == "DUPLICATE_CHILD"
    await settle(w)
    prompts = [
        e.data["content"] for e in (await stored(w, "kid")).events if e.type == "user/message"
    ]
    assert prompts[0] == "a" and "b" not in prompts


async def test_missing_persistence_is_rejected_before_anything_exists(tmp_path: Path) -> None:
    w = world(tmp_path, [PARENT], persistence=False)
    manager = subagents(w)
    parent = w.root()
    with pytest.raises(SubagentError) as err:
        await manager.start(parent, "task")
    assert err.value.code == "PERSISTENCE_UNAVAILABLE"
    assert [s.id for s in w.store.live()] == [parent.id]
    assert len(w.agents) == 1


async def test_abort_before_acceptance_rolls_everything_back(tmp_path: Path) -> None:
    w = world(tmp_path, [PARENT])
    manager = subagents(w)
    parent = w.root()
    before = len(parent.session)
    signal = AbortSignal()
    signal.abort("user")
    with pytest.raises(SubagentError) as err:
        await manager.start(parent, "task", child_id="kid", signal=signal)
    assert err.value.code == "CANCELLED"
    assert not await w.store.exists("kid")
    assert len(w.agents) == 1 and manager.resident() == []
    # Silence for a rolled-back child: no settlement notice reaches the parent.
    await settle(w)
    assert len(parent.session) == before


async def test_depth_cap_is_absolute_on_the_childs_depth(tmp_path: Path) -> None:
    w = world(tmp_path, [PARENT, child([hold("c"), {"text": "done"}])])
    gates = hold_tool(w)
    manager = subagents(w)
    parent = w.root()
    with pytest.raises(SubagentDepthError, match=r"^subagent depth 1 exceeds maxDepth 0$"):
        await manager.start(parent, "task", max_depth=0)
    child_id = await manager.start(parent, "task", max_depth=1)
    activation = manager.activation(child_id)
    assert activation is not None and activation.agent.depth == 1
    with pytest.raises(SubagentDepthError, match=r"^subagent depth 2 exceeds maxDepth 1$"):
        await manager.start(activation.agent, "deeper", max_depth=1)
    gates.gate("c").set()
    await settle(w)
    assert len(await stored_headers(w)) == 2


# -- resume: descriptor, persona, tool filter, turn numbering ------------------------------------


async def test_descriptor_persona_and_tool_filter_are_reapplied_on_cold_resume(
    tmp_path: Path,
) -> None:
    persona = "You are the careful reviewer."
    w = world(tmp_path, [PARENT, child([{"text": "first"}, write("x.txt"), {"text": "no write"}])])
    manager = subagents(w)
    parent = w.root()
    child_id = await manager.start(
        parent, "review", label="rev", persona=persona, tool_filter=ToolFilter(allow=("read",))
    )
    await settle(w)
    await manager.followup(parent, child_id, "now write x.txt")
    await settle(w)
    events = (await stored(w, child_id)).events
    assert plain(events[0]) == {
        "version": 2,
        "mode": "continuable",
        "provider": "spawn",
        "label": "rev",
        "persona": persona,
        "tool_filter": {"allow": ["read"]},
    }
    logged = [plain(e) for e in events if e.type == "request/header"]
    # The cold-resumed child's first request logs its header as "resume"; its system prompt
    # (persona) and tool list (filter plus the continuable-only report tool) are
    # byte-identical to the original's.
    assert [e["reason"] for e in logged] == ["initial", "resume"]
    headers = [e["header"] for e in logged]
    assert headers[0] == headers[1]
    assert persona in headers[0]["system"]
    assert headers[0]["tools"] == ["read", "report"]
    assert texts(events) == ['Error: unknown tool "write"']
    assert not (w.workspace / "x.txt").exists()
    assert [e.data["turn"] for e in events if e.type == "turn/start"] == [1, 2]


async def test_turn_numbering_continues_after_the_fork_prefix_across_resume(
    tmp_path: Path,
) -> None:
    w = world(tmp_path, [PARENT, child([{"text": "one"}, {"text": "two"}])])
    manager = subagents(w)
    parent = w.root()
    await parent.run("a")
    await parent.run("b")
    child_id = await manager.start(parent, "fork", provider="fork")
    await settle(w)
    await manager.followup(parent, child_id, "again")
    await settle(w)
    durable = await stored(w, child_id)
    own = durable.events[durable.header.seed_length :]
    assert [e.data["turn"] for e in own if e.type == "turn/start"] == [3, 4]
    assert [str(e.data["content"]) for e in own if e.type == "assistant/message"] == [
        "one",
        "two",
    ]


# -- followup routing and authorization ----------------------------------------------------------


async def test_followup_to_a_running_child_is_enqueued(tmp_path: Path) -> None:
    w = world(tmp_path, [PARENT, child([hold("c"), {"text": "first"}, {"text": "second"}])])
    gates = hold_tool(w)
    manager = subagents(w)
    parent = w.root()
    child_id = await manager.start(parent, "task")
    activation = manager.activation(child_id)
    assert activation is not None
    await until(lambda: activation.agent.status == "running", "child running")
    await manager.followup(parent, child_id, "queued message")
    assert manager.activation(child_id) is activation
    gates.gate("c").set()
    await settle(w)
    events = (await stored(w, child_id)).events
    # Same residency: the queued message became turn 2 without a resume marker.
    assert types(events).count("session/end-seed") == 1
    turn2 = next(e.seq for e in events if e.type == "turn/start" and e.data["turn"] == 2)
    assert plain(events[turn2 + 2]) == {"content": "queued message", "source": {"kind": "user"}}
    # One settlement for the whole residency, carrying the last reply.
    notices = user_messages(parent.session.events, "subagent-settled")
    assert [str(n.data["content"]) for n in notices] == [
        f"Background subagent {child_id} {FINISHED} Its closing message: second"
    ]


async def test_followup_wakes_a_child_waiting_on_its_own_children(tmp_path: Path) -> None:
    w = world(
        tmp_path,
        [
            PARENT,
            child(
                [
                    call("subagent", description="gc", prompt="go"),
                    {"text": "started"},
                    {"text": "woken"},
                    {"text": "got gc"},
                ]
            ),
            child([hold("gc"), {"text": "gc done"}], depth=2),
        ],
    )
    gates = hold_tool(w)
    manager = subagents(w)
    parent = w.root()
    child_id = await manager.start(parent, "task")
    activation = manager.activation(child_id)
    assert activation is not None
    agent = activation.agent
    await until(lambda: "turn/end" in types(agent.session.events), "child turn 1 ended")
    await until(lambda: agent.status == "idle", "child idle")
    # Waiting: idle but still resident because it owns a running grandchild.
    assert manager.activation(child_id) is activation
    rows = await manager.list_children(parent.id)
    assert [(r.id, r.status) for r in rows] == [(child_id, "idle")]
    await manager.followup(parent, child_id, "wake up")
    assert agent.status == "running"
    gates.gate("gc").set()
    await settle(w)
    events = (await stored(w, child_id)).events
    assert types(events).count("session/end-seed") == 1  # never cold-resumed
    assert [str(e.data["content"]) for e in events if e.type == "assistant/message"][1:] == [
        "started",
        "woken",
        "got gc",
    ]
    # The grandchild's settlement notice reached the child, not the void.
    gc_notices = user_messages(events, "subagent-settled")
    assert len(gc_notices) == 1 and "Its closing message: gc done" in str(
        gc_notices[0].data["content"]
    )


async def test_followup_to_a_settled_child_cold_resumes_it(tmp_path: Path) -> None:
    w = world(tmp_path, [PARENT, child([{"text": "one"}, {"text": "two"}])])
    manager = subagents(w)
    parent = w.root()
    child_id = await manager.start(parent, "task")
    await settle(w)
    assert manager.activation(child_id) is None and w.store.get(child_id) is None
    await manager.followup(
        parent, child_id, "more", source={"kind": "coordinator", "form": "relay"}
    )
    activation = manager.activation(child_id)
    assert activation is not None and w.agents.get(child_id) is activation.agent
    await settle(w)
    events = (await stored(w, child_id)).events
    assert types(events).count("session/end-seed") == 2
    resumed = [e for e in events if e.type == "user/message" and e.data["content"] == "more"]
    assert plain(resumed[0])["source"] == {"kind": "coordinator", "form": "relay"}
    assert len(user_messages(parent.session.events, "subagent-settled")) == 2


async def test_only_the_exact_live_direct_parent_may_send(tmp_path: Path) -> None:
    w = world(tmp_path, [PARENT, child([hold("c"), {"text": "done"}])])
    gates = hold_tool(w)
    manager = subagents(w)
    parent, stranger = w.root(), w.root()
    child_id = await manager.start(parent, "task")
    impostor = Agent(w.ctx, parent.session, AgentOptions(w.model), tools=w.tools)
    for sender in (stranger, impostor):
        with pytest.raises(SubagentError) as err:
            await manager.followup(sender, child_id, "hi")
        assert err.value.code == "UNAUTHORIZED"
    gates.gate("c").set()
    await settle(w)
    # Cold path: authorization happens before anything is loaded or appended.
    before = len((await stored(w, child_id)).events)
    with pytest.raises(SubagentError) as err:
        await manager.followup(stranger, child_id, "hi")
    assert err.value.code == "UNAUTHORIZED"
    assert w.store.get(child_id) is None
    assert len((await stored(w, child_id)).events) == before


async def test_unknown_and_one_shot_ids_are_not_resumable(tmp_path: Path) -> None:
    w = world(tmp_path, [PARENT, child([{"text": "one-shot reply"}])])
    manager = subagents(w)
    parent = w.root()
    with pytest.raises(SubagentError, match=r'^subagent "nope" is unavailable$') as unknown:
        await manager.followup(parent, "nope", "hi")
    assert unknown.value.code == "NOT_RESUMABLE"
    result = await run_one_shot(OneShotRequest(parent, "once"))
    with pytest.raises(SubagentError) as one_shot:
        await manager.followup(parent, result.child_id, "hi")
    assert one_shot.value.code == "NOT_RESUMABLE"
    assert str(one_shot.value) == (
        f"subagent {result.child_id} is not continuable; do not retry send_message with this id"
    )
    assert w.store.get(result.child_id) is None


async def test_a_fork_of_a_continuable_child_is_judged_by_its_own_descriptor(
    tmp_path: Path,
) -> None:
    # The one-shot fork grandchild inherits its parent's continuable descriptor through the
    # seed; only the descriptor in its own suffix (after seed_length) counts.
    w = world(
        tmp_path,
        [
            PARENT,
            child([{"text": "turn one"}, hold("c"), {"text": "done"}]),
            child([{"text": "fork reply"}], depth=2),
        ],
    )
    gates = hold_tool(w)
    manager = subagents(w)
    parent = w.root()
    child_id = await manager.start(parent, "one")
    await settle(w)
    await manager.followup(parent, child_id, "two")
    activation = manager.activation(child_id)
    assert activation is not None
    result = await run_one_shot(OneShotRequest(activation.agent, "fork", provider="fork"))
    gc = await stored(w, result.child_id)
    assert gc.events[0].type == "subagent/descriptor"
    assert gc.events[0].data["mode"] == "continuable"
    with pytest.raises(SubagentError) as err:
        await manager.followup(activation.agent, result.child_id, "hi")
    assert err.value.code == "NOT_RESUMABLE"
    gates.gate("c").set()
    await settle(w)


# -- settlement notices --------------------------------------------------------------------------


async def test_idle_parent_gets_a_new_turn_with_the_notice(tmp_path: Path) -> None:
    w = world(tmp_path, [PARENT, child([{"text": "the answer"}])])
    manager = subagents(w)
    parent = w.root()
    child_id = await manager.start(parent, "task")
    # Delivery happens before ownership is released: when the notice reaches the parent's
    # inbox the child is still registered and its session still live.
    at_delivery: list[tuple[bool, bool]] = []
    parent.session.observe(
        lambda _s, e: (
            at_delivery.append(
                (w.agents.get(child_id) is not None, w.store.get(child_id) is not None)
            )
            if e.type == "agent/inbox/spliced"
            else None
        )
    )
    await settle(w)
    assert at_delivery == [(True, True)]
    events = parent.session.events
    assert types(events)[:4] == ["agent/inbox/spliced", "turn/start", "step/start", "user/message"]
    notice = events[3]
    summary = f"Background subagent {child_id} {FINISHED}"
    assert plain(notice) == {
        "content": f"{summary} Its closing message: the answer",
        "source": {
            "kind": "subagent-settled",
            "form": "notice",
            "summary": summary,
            "sender_session_id": child_id,
        },
    }
    assert plain(events[0])["target"] == "next-turn"


async def test_busy_parent_gets_the_notice_folded_into_its_next_step(tmp_path: Path) -> None:
    w = world(
        tmp_path,
        [
            {
                "match": {"depth": 0},
                "steps": [
                    {
                        "tool_calls": [
                            {
                                "name": "subagent",
                                "arguments": {"description": "bg", "prompt": "go"},
                            },
                            {"name": "hold", "arguments": {"key": "parent"}},
                        ]
                    },
                    {"text": "saw it", "expect": "Background subagent .* finished"},
                ],
            },
            child([{"text": "quick"}]),
        ],
    )
    gates = hold_tool(w)
    subagents(w)
    done = ended(w)
    parent = w.root()
    parent.followup("delegate and wait")
    await done.wait()  # the child settled while the parent is still inside its hold call
    assert parent.status == "running"
    gates.gate("parent").set()
    await settle(w)
    events = parent.session.events
    assert [e.data["turn"] for e in events if e.type == "turn/start"] == [1]  # no new turn
    notice = user_messages(events, "subagent-settled")[0]
    steps = [e for e in events[: notice.seq] if e.type == "step/start"]
    assert [e.data["step"] for e in steps] == [1, 2]  # claimed at the next step boundary
    spliced = [plain(e) for e in events if e.type == "agent/inbox/spliced"]
    assert [s["target"] for s in spliced] == ["next-turn", "next-step"]
    assert parent.last_result is not None and parent.last_result.output == "saw it"


async def test_a_tearing_down_parent_records_the_notice_without_waking(tmp_path: Path) -> None:
    w = world(tmp_path, [PARENT, child([{"text": "late"}])])
    manager = subagents(w)
    parent = w.root()
    child_id = await manager.start(parent, "task")
    parent.closing = True
    await settle(w)
    events = parent.session.events
    assert types(events) == ["agent/inbox/spliced"]
    assert plain(events[0]) == {"target": "inject", "start": 0, "inserted": 1}
    assert parent.status == "idle" and parent.inbox.pending("inject") == 1
    assert manager.activation(child_id) is None


async def test_settlement_summary_names_a_failed_child(tmp_path: Path) -> None:
    w = world(tmp_path, [PARENT, child([{"text": "partial"}, {"text": "x", "expect": "never"}])])
    manager = subagents(w)
    parent = w.root()
    # The second step's expectation fails: the model errors and the turn ends "error".
    child_id = await manager.start(parent, "task")
    await settle(w)
    await manager.followup(parent, child_id, "continue")
    await settle(w)
    notices = [
        str(n.data["content"]) for n in user_messages(parent.session.events, "subagent-settled")
    ]
    assert notices[0].endswith("Its closing message: partial")
    assert notices[1] == f"Background subagent {child_id} failed. It left no closing message."


# -- interrupt -----------------------------------------------------------------------------------

# The child starts a background grandchild and holds in the same step; the grandchild holds.
DELEGATE_AND_HOLD: dict[str, Any] = {
    "tool_calls": [
        {"name": "subagent", "arguments": {"description": "gc", "prompt": "go"}},
        {"name": "hold", "arguments": {"key": "c"}},
    ]
}
TREE = [
    PARENT,
    child([DELEGATE_AND_HOLD, {"text": "c done"}] + [{"text": "c more"}] * 4),
    child([hold("g"), {"text": "g done"}] + [{"text": "g more"}] * 4, depth=2),
]


async def _tree(w: World) -> tuple[Any, Agent, Agent, Agent]:
    manager = subagents(w)
    parent = w.root()
    child_id = await manager.start(parent, "task")
    c = manager.activation(child_id).agent
    await until(lambda: len(manager.resident()) == 2, "grandchild started")
    g = next(a for a in manager.resident() if a is not c)
    await until(lambda: holding(c) and holding(g), "both inside their hold calls")
    return manager, parent, c, g


def aborted_turns(events: Any) -> list[dict[str, Any]]:
    return [plain(e) for e in events if e.type == "turn/end" and e.data["reason"] == "aborted"]


async def test_interrupt_authority_matrix(tmp_path: Path) -> None:
    w = world(tmp_path, TREE)
    gates = hold_tool(w)
    manager, parent, c, g = await _tree(w)
    stranger = w.root()
    impostor = Agent(w.ctx, parent.session, AgentOptions(w.model), tools=w.tools)
    refused = [
        (c.id, UserAuthority("someone-else")),
        (g.id, UserAuthority(parent.id)),  # the human holds the parent address, not g's
        (c.id, AncestorAuthority(stranger)),  # live, but not an ancestor
        (c.id, AncestorAuthority(c)),  # not itself
        (g.id, AncestorAuthority(g)),
        (c.id, AncestorAuthority(impostor)),  # not the exact live registry entry
    ]
    for target, authority in refused:
        with pytest.raises(SubagentError) as err:
            manager.interrupt(target, authority)
        assert err.value.code == "UNAUTHORIZED", (target, authority)
    assert c.status == "running" and g.status == "running"
    # Absent and unknown targets are accepted no-ops.
    assert manager.interrupt("nobody", AncestorAuthority(stranger)) is True
    # A live ancestor two levels up may interrupt the grandchild.
    assert manager.interrupt(g.id, AncestorAuthority(parent)) is True
    await until(lambda: bool(aborted_turns(g.session.events)), "g aborted")
    assert aborted_turns(g.session.events) == [{"turn": 1, "reason": "aborted", "cause": "parent"}]
    # The human holding the child's durable parent address may interrupt the child.
    assert manager.interrupt(c.id, UserAuthority(parent.id)) is True
    await until(lambda: bool(aborted_turns(c.session.events)), "c aborted")
    cancelled = [t for t in texts(c.session.events) if "cancelled" in t]
    assert cancelled == ['Error: tool "hold" was cancelled']
    gates.gate("c").set()
    gates.gate("g").set()
    await settle(w)


async def test_interrupt_keeps_queued_work(tmp_path: Path) -> None:
    w = world(tmp_path, [PARENT, child([hold("c"), {"text": "after interrupt"}])])
    hold_tool(w)
    manager = subagents(w)
    parent = w.root()
    child_id = await manager.start(parent, "task")
    agent = manager.activation(child_id).agent
    await until(lambda: holding(agent), "inside its hold call")
    await manager.followup(parent, child_id, "queued")
    manager.interrupt(child_id, AncestorAuthority(parent))
    await settle(w)
    events = (await stored(w, child_id)).events
    ends = [plain(e) for e in events if e.type == "turn/end"]
    assert ends == [
        {"turn": 1, "reason": "aborted", "cause": "parent"},
        {"turn": 2, "reason": "completed"},
    ]
    assert not any(plain(e).get("removed_count") for e in events if e.type == "agent/inbox/spliced")


# -- report --------------------------------------------------------------------------------------


async def test_report_is_relayed_to_the_parent(tmp_path: Path) -> None:
    w = world(
        tmp_path,
        [
            PARENT,
            child([call("report", output="halfway there"), {"text": "done"}]),
        ],
    )
    manager = subagents(w)
    parent = w.root()
    child_id = await manager.start(parent, "task")
    await settle(w)
    reports = user_messages(parent.session.events, "subagent-report")
    assert [plain(r) for r in reports] == [
        {
            "content": f"Background subagent {child_id} reported: halfway there",
            "source": {"kind": "subagent-report", "form": "relay", "sender_session_id": child_id},
        }
    ]
    assert texts((await stored(w, child_id)).events) == ["report delivered"]
    assert len(user_messages(parent.session.events, "subagent-settled")) == 1


async def test_report_exists_only_in_continuable_children(tmp_path: Path) -> None:
    w = world(
        tmp_path,
        [
            {"match": {"depth": 0}, "steps": [call("report", output="x"), {"text": "ok"}]},
            child([{"text": "one-shot"}]),
        ],
    )
    subagents(w)
    parent = w.root()
    await parent.run("try")
    assert texts(parent.session.events) == ['Error: unknown tool "report"']
    header = next(plain(e) for e in parent.session.events if e.type == "request/header")
    assert "report" not in header["header"]["tools"]
    result = await run_one_shot(OneShotRequest(parent, "once"))
    events = (await stored(w, result.child_id)).events
    header = next(plain(e) for e in events if e.type == "request/header")
    assert "report" not in header["header"]["tools"]


async def test_report_needs_a_live_parent(tmp_path: Path) -> None:
    w = world(tmp_path, [PARENT, child([hold("c"), {"text": "done"}])])
    gates = hold_tool(w)
    manager = subagents(w)
    parent = w.root()
    child_id = await manager.start(parent, "task")
    agent = manager.activation(child_id).agent
    with pytest.raises(SubagentError) as stranger:
        manager.report_from(parent, "not a child")
    assert stranger.value.code == "UNAUTHORIZED"
    w.unregister[parent.id]()
    with pytest.raises(SubagentError) as gone:
        manager.report_from(agent, "anyone?")
    assert gone.value.code == "PARENT_UNAVAILABLE"
    gates.gate("c").set()
    await settle(w)


# -- drain ---------------------------------------------------------------------------------------


async def test_drain_disposes_children_first_and_closes_admission(tmp_path: Path) -> None:
    w = world(tmp_path, TREE)
    hold_tool(w)
    order: list[str] = []
    w.store.on_disposed(lambda session: order.append(session.id))
    manager, parent, c, g = await _tree(w)
    for agent in w.agents:
        agent.closing = True
    await manager.drain()
    assert order == [g.id, c.id]
    assert manager.resident() == []
    assert [plain(e)["cause"] for e in g.session.events if e.type == "turn/end"] == ["disposed"]
    # The grandchild's notice was recorded in the child without waking it (teardown).
    injected = [plain(e) for e in c.session.events if e.type == "agent/inbox/spliced"]
    assert injected[-1] == {"target": "inject", "start": 0, "inserted": 1}
    assert parent.status == "idle" and "turn/start" not in types(parent.session.events)
    with pytest.raises(SubagentError) as err:
        await manager.start(parent, "late")
    assert err.value.code == "DRAINING"


async def test_drain_right_after_acceptance_runs_no_turn(tmp_path: Path) -> None:
    w = world(tmp_path, [PARENT, child([write("during-drain.txt"), {"text": "done"}])])
    manager = subagents(w)
    parent = w.root()
    child_id = await manager.start(parent, "task")
    await manager.drain()
    events = (await stored(w, child_id)).events
    # A ``disposed`` cancel parks unclaimed work (``agent/_inbox.py``): no turn, no write.
    assert not (w.workspace / "during-drain.txt").exists()
    assert "turn/start" not in types(events)
