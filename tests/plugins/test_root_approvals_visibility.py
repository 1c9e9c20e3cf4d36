"""Blocked and denied children made visible (``list_agents``, the lineage tree, parent
notices) and narrowing (a tool instance's sandbox cap, ``ContinuationManager.narrow`` on a live
and a stored child, widening refused): issue 6 items 4 and 5, ``docs/decisions/0022-blocked-and-denied-visibility.md``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_root_approvals_support import (
    Hold,
    Rig,
    call,
    eventually,
    layout,
    notices,
    plain,
    results,
    settle,
    write,
)

from tether.errors import TetherError
from tether.session import Event
from tether.subagents import SUBAGENTS_SERVICE
from tether.subagents._lineage import lineage_tree, render_tree, walk
from tether.subagents._narrowing import narrow_live, narrow_stored
from tether.subagents._visibility import (
    PendingQuestion,
    blocked_labels,
    is_denial,
    last_denial,
    pending_from_log,
)

NOTES_HEADLINE = (
    'Subagent approval: run "write" · Arguments: {"content": "notes"} · Path: notes.txt'
)
READ_ONLY_DENIAL = (
    "Error: cannot write notes.txt: the sandbox is read-only "
    "[sandbox: file access denied under read-only mode]"
)
NARROWED = (
    'Your delegating agent narrowed your sandbox to "read-only". Operations outside it will be '
    "denied; report any limitation in your reply."
)


def agents(root: list[dict[str, Any]], *children: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"match": {"depth": 0}, "steps": root}, *children]


def sub(label: str, depth: int, *steps: dict[str, Any]) -> dict[str, Any]:
    return {"match": {"depth": depth, "label": label}, "steps": list(steps)}


def spawn(label: str, prompt: str = "do it", **extra: Any) -> dict[str, Any]:
    return call("subagent", description=label, prompt=prompt, **extra)


async def child_id(rig: Rig, parent: str = "root") -> str:
    (header,) = await rig.children_of(parent)
    return header.id


# -- list_agents: blocked while the root holds the answer, denied afterwards -----------------------
async def test_list_agents_shows_blocked_then_denied_and_the_parent_is_told(
    tmp_path: Path,
) -> None:
    rig = Rig(
        tmp_path,
        agents(
            [
                spawn("writer", "write notes.txt"),
                {"text": "started", "expect": "^started subagent "},
                call("list_agents"),  # turn 2, while the answer is held
                {"text": "checked", "expect": "blocked: waiting for approval"},
                {"text": "noted", "expect": "was denied"},  # the settlement turn
                call("list_agents"),  # turn 4
                {"text": "done", "expect": "denied: write"},
            ],
            sub("writer", 1, write("notes.txt", "notes"), {"text": "could not write notes"}),
        ),
        subagents={},
        config={"guarded": ["write"], "blocked_notice_seconds": 0.05},
    )
    answer = rig.held("rejected")
    root = rig.agent("root")
    await root.run("delegate")
    child = await child_id(rig)
    await eventually(lambda: bool(rig.approval.pending()), "the routed question is open")
    (pending,) = rig.approval.pending()
    assert (pending.root_session_id, pending.child_session_id, pending.headline) == (
        "root",
        child,
        NOTES_HEADLINE,
    )
    await eventually(lambda: root.inbox.pending("inject") == 1, "the blocked notice")
    await root.run("status")
    answer.set()
    await settle(rig)
    await root.run("again")
    listed = [r for r in results(root.session.events) if not r.startswith("started")]
    assert listed == [
        f"{child} writer: running; blocked: waiting for approval ({NOTES_HEADLINE})",
        f"{child} writer: ready; denied: write (the root session's user rejected this "
        'subagent\'s "write" call)',
    ]
    assert notices(root.session.events) == [
        f"Subagent {child} has been waiting for approval for more than 0.05s: {NOTES_HEADLINE}",
        f"Subagent {child}'s write call was denied: the root session's user rejected this "
        'subagent\'s "write" call',
    ]
    assert not (rig.workspace / "notes.txt").exists()
    assert rig.approval.pending() == []


async def test_a_grandchilds_question_shows_on_its_parents_row(tmp_path: Path) -> None:
    rig = Rig(
        tmp_path,
        agents(
            [
                spawn("coordinator"),
                {"text": "started", "expect": "^started subagent "},
                call("list_agents"),
                call("list_agents", scope="descendants"),
                {"text": "checked"},
                {"text": "noted"},
            ],
            sub(
                "coordinator",
                1,
                spawn("helper", "write notes.txt", run_in_background=False),
                {"text": "helper finished"},
            ),
            sub("helper", 2, write("notes.txt", "notes"), {"text": "wrote notes"}),
        ),
        subagents={},
        config={"guarded": ["write"], "blocked_notice_seconds": 0.05},
    )
    answer = rig.held("allowed-once")
    root = rig.agent("root")
    await root.run("delegate")
    coordinator = await child_id(rig)
    await eventually(lambda: bool(rig.approval.pending()), "the routed question is open")
    (pending,) = rig.approval.pending()
    helper = pending.child_session_id
    assert pending.lineage == (helper, coordinator, "root")
    await eventually(
        lambda: (c := rig.registry.get(coordinator)) is not None and c.inbox.pending("inject") == 1,
        "the blocked notice reaches the helper's own parent",
    )
    await root.run("status")
    waiting = f"blocked: descendant {helper} is waiting for approval ({NOTES_HEADLINE})"
    assert results(root.session.events)[1:] == [
        f"{coordinator} coordinator: running; {waiting}",
        f"{coordinator} coordinator: running (depth 1, parent root); {waiting}",
    ]
    # The stored tree says the same, from the root's durable pending record.
    for session in rig.store.live():
        await rig.store.flush(session)
    tree = await lineage_tree(rig.persistence, "root")
    labels = {node.id: node.blocked for node in walk(tree)}
    assert labels == {
        "root": None,
        coordinator: waiting,
        helper: f"blocked: waiting for approval ({NOTES_HEADLINE})",
    }
    answer.set()
    await settle(rig)
    assert (rig.workspace / "notes.txt").read_text() == "notes"
    assert notices(await rig.durable(coordinator)) == [
        f"Subagent {helper} has been waiting for approval for more than 0.05s: {NOTES_HEADLINE}"
    ]
    assert notices(root.session.events) == []
    tree = await lineage_tree(rig.persistence, "root")
    assert [node.blocked for node in walk(tree)] == [None, None, None]


# -- confined to the child's mode, and the parent hears of the scope denial ----------------------
REVIEWER = {
    "instances": [
        {"name": "subagent"},
        {"name": "reviewer", "sandbox": "read-only", "background_mode": "one-shot"},
    ]
}


async def test_an_approved_call_still_runs_inside_the_childs_capped_mode(tmp_path: Path) -> None:
    rig = Rig(
        tmp_path,
        agents(
            [call("reviewer", description="reviewer", prompt="write notes"), {"text": "done"}],
            sub("reviewer", 1, write("notes.txt", "notes"), {"text": "read-only, sorry"}),
        ),
        subagents=REVIEWER,
        config={"guarded": ["write"]},
    )
    rig.answer("allowed-once")
    root = rig.agent("root")
    await root.run("review")
    child = await child_id(rig)
    events = await rig.durable(child)
    # The cap is the child's delegation event: read-only under a workspace-write parent.
    assert [(t, d) for t, d in layout(events, ("sandbox/", "approval/p"))] == [
        ("sandbox/mode", {"mode": "read-only", "source": "delegation"}),
        ("approval/policy", {"policy": "never", "source": "delegation"}),
    ]
    assert [plain(e)["outcome"] for e in events if e.type == "approval/decided"] == ["allowed-once"]
    assert results(events) == [READ_ONLY_DENIAL]
    assert not (rig.workspace / "notes.txt").exists()
    assert notices(root.session.events) == [
        f"Subagent {child}'s write call was denied by its scope: {READ_ONLY_DENIAL}"
    ]
    tree = await lineage_tree(rig.persistence, "root")
    (node,) = tree.children
    assert (node.kind, node.mode, node.mode_source, node.blocked) == (
        "one-shot",
        "read-only",
        "delegation",
        None,
    )
    assert node.denied == f"denied: write ({READ_ONLY_DENIAL.removeprefix('Error: ')})"
    line = render_tree(tree)[1]
    assert line.startswith(
        f"└── {child} [reviewer]  one-shot  depth 1  mode read-only (delegation)"
    )
    assert line.endswith(f"completed  {node.denied}")


async def test_a_cap_never_widens_a_read_only_parent(tmp_path: Path) -> None:
    config = {
        "instances": [
            {"name": "worker", "sandbox": "workspace-write", "background_mode": "one-shot"}
        ]
    }
    rig = Rig(
        tmp_path,
        agents(
            [call("worker", description="worker", prompt="go"), {"text": "done"}],
            sub("worker", 1, {"text": "nothing to do"}),
        ),
        subagents=config,
    )
    root = rig.agent("root", mode="read-only")
    await root.run("go")
    events = await rig.durable(await child_id(rig))
    assert layout(events, ("sandbox/",)) == [
        ("sandbox/mode", {"mode": "read-only", "source": "delegation"})
    ]


# -- narrowing a running and a stored child --------------------------------------------------------
def worker_rig(tmp_path: Path, *child_steps: dict[str, Any]) -> tuple[Rig, Hold]:
    rig = Rig(
        tmp_path,
        agents(
            [spawn("worker"), {"text": "started"}, {"text": "noted"}, {"text": "noted again"}],
            sub("worker", 1, *child_steps),
        ),
        subagents={},
        config={"guarded": ["bash"]},
    )
    hold = Hold()
    rig.tools.register(hold)
    return rig, hold


async def test_narrowing_a_running_child(tmp_path: Path) -> None:
    rig, hold = worker_rig(
        tmp_path,
        call("hold", key="a"),
        write("late.txt"),
        {"text": "the sandbox stopped me"},
    )
    root = rig.agent("root")
    await root.run("delegate")
    child = await child_id(rig)
    await eventually(lambda: "a" in hold.entered, "the child is working")
    manager = rig.ctx.get(SUBAGENTS_SERVICE)
    live = rig.registry.get(child)
    assert live is not None
    before = len(live.session)
    assert await manager.narrow(root, child, "read-only") is True
    assert [
        (e.type, plain(e)) for e in live.session.events[before:] if e.type == "sandbox/mode"
    ] == [("sandbox/mode", {"mode": "read-only", "source": "parent"})]
    assert await manager.narrow(root, child, "read-only") is False  # already there
    with pytest.raises(TetherError) as widened:
        await manager.narrow(root, child, "workspace-write")
    assert widened.value.code == "CANNOT_NARROW"
    assert str(widened.value) == (
        f'cannot widen subagent {child} from "read-only" to "workspace-write": a child\'s scope '
        "can only be narrowed"
    )
    assert [plain(e)["mode"] for e in live.session.events if e.type == "sandbox/mode"] == [
        "read-only"
    ]
    hold.gate("a").set()
    await settle(rig)
    events = await rig.durable(child)
    assert results(events)[1] == READ_ONLY_DENIAL.replace("notes.txt", "late.txt")
    narrowed = [
        plain(e)
        for e in events
        if e.type == "user/message" and plain(e)["source"].get("plugin") == "subagents"
    ]
    assert narrowed == [
        {"content": NARROWED, "source": {"kind": "plugin", "plugin": "subagents", "form": "notice"}}
    ]
    assert not (rig.workspace / "late.txt").exists()


async def test_narrowing_a_stored_child_holds_after_cold_resume(tmp_path: Path) -> None:
    rig, _hold = worker_rig(
        tmp_path,
        write("first.txt"),
        {"text": "wrote first"},
        write("second.txt"),
        {"text": "second was denied"},
    )
    root = rig.agent("root")
    await root.run("delegate")
    await settle(rig)
    child = await child_id(rig)
    assert rig.store.get(child) is None  # settled and disposed: only stored
    manager = rig.ctx.get(SUBAGENTS_SERVICE)
    with pytest.raises(TetherError) as widened:
        await manager.narrow(root, child, "danger-full-access")
    assert widened.value.code == "CANNOT_NARROW"
    assert await manager.narrow(root, child, "read-only") is True
    assert await manager.narrow(root, child, "read-only") is False
    stored = await rig.durable(child)
    assert [plain(e) for e in stored if e.type == "sandbox/mode"] == [
        {"mode": "read-only", "source": "parent"}
    ]
    await manager.followup(root, child, "write the second file")
    await settle(rig)
    assert (rig.workspace / "first.txt").exists()
    assert not (rig.workspace / "second.txt").exists()
    assert results(await rig.durable(child))[-1] == READ_ONLY_DENIAL.replace(
        "notes.txt", "second.txt"
    )


async def test_only_an_ancestor_may_narrow_and_never_a_top_level_session(tmp_path: Path) -> None:
    rig, hold = worker_rig(tmp_path, call("hold", key="a"), {"text": "done"})
    root = rig.agent("root")
    stranger = rig.agent("stranger")
    await root.run("delegate")
    child = await child_id(rig)
    await eventually(lambda: "a" in hold.entered, "the child is working")
    manager = rig.ctx.get(SUBAGENTS_SERVICE)
    with pytest.raises(TetherError) as refused:
        await manager.narrow(stranger, child, "read-only")
    assert (refused.value.code, str(refused.value)) == (
        "UNAUTHORIZED",
        f"not allowed to narrow subagent {child}",
    )
    with pytest.raises(TetherError) as top:
        narrow_live(rig.ctx, root, "read-only")
    assert (top.value.code, str(top.value)) == (
        "CANNOT_NARROW",
        "session root is not a subagent; use /permission instead",
    )
    hold.gate("a").set()
    await settle(rig)
    with pytest.raises(TetherError) as stored_stranger:
        await manager.narrow(stranger, child, "read-only")
    assert stored_stranger.value.code == "UNAUTHORIZED"


async def test_narrowing_a_stored_log_with_an_open_turn_is_refused(tmp_path: Path) -> None:
    rig = Rig(tmp_path, [])
    root = rig.agent("root")
    child = rig.agent("child", parent=root, mode="workspace-write")
    child.session.append("turn/start", {"turn": 1})
    await rig.store.dispose(child.session)  # as a crash (or another process) leaves it
    lines = (tmp_path / "store" / "child" / "session.jsonl").read_text()
    with pytest.raises(TetherError) as refused:
        await narrow_stored(rig.persistence, "child", "read-only")
    assert refused.value.code == "CANNOT_NARROW"
    assert str(refused.value).startswith("subagent child has an unfinished turn")
    # nothing was written: in particular no synthetic closers inside a turn someone may own
    assert (tmp_path / "store" / "child" / "session.jsonl").read_text() == lines


async def test_a_stored_child_without_a_recorded_mode_only_narrows_to_read_only(
    tmp_path: Path,
) -> None:
    rig = Rig(tmp_path, [])
    root = rig.agent("root", mode="workspace-write")
    child = rig.agent("child", parent=root)
    await rig.store.dispose(child.session)
    await rig.store.flush(root.session)
    with pytest.raises(TetherError) as unknown:
        await narrow_stored(rig.persistence, "child", "workspace-write")
    assert str(unknown.value) == (
        "subagent child has no recorded sandbox mode; only read-only is guaranteed to narrow it"
    )
    assert await narrow_stored(rig.persistence, "child", "read-only") is True
    with pytest.raises(TetherError) as top:
        await narrow_stored(rig.persistence, "root", "read-only")
    assert top.value.code == "CANNOT_NARROW"


# -- the visibility functions on their own ---------------------------------------------------------
def event(seq: int, type: str, **data: Any) -> Event:
    surface = "append" if type in ("tool/result", "user/message") else None
    return Event.make(type, seq, 0, data, surface_op=surface)


def test_blocked_labels_cover_the_asker_and_its_non_root_ancestors() -> None:
    question = PendingQuestion("q1", "g", 'Subagent approval: run "bash"', ("g", "c", "r"))
    assert blocked_labels([question]) == {
        "g": 'blocked: waiting for approval (Subagent approval: run "bash")',
        "c": 'blocked: descendant g is waiting for approval (Subagent approval: run "bash")',
    }
    # an older question of the child itself wins over a descendant's on its row
    own = PendingQuestion("q0", "c", "own", ("c", "r"))
    assert blocked_labels([own, question])["c"] == "blocked: waiting for approval (own)"


def test_pending_from_log_keeps_only_undecided_questions() -> None:
    events = [
        event(
            0,
            "approval/pending",
            id="a",
            state="pending",
            child_session="c",
            tool_name="write",
            reason="h1",
            lineage=["c", "r"],
        ),
        event(
            1,
            "approval/pending",
            id="b",
            state="pending",
            child_session="d",
            tool_name="bash",
            reason="h2",
            lineage=["d", "r"],
        ),
        event(2, "approval/pending", id="a", state="decided", outcome="rejected"),
    ]
    assert pending_from_log(events) == [PendingQuestion("b", "d", "h2", ("d", "r"))]


def test_last_denial_reads_the_newest_scope_denial() -> None:
    routed = "Error: the root session's user rejected this subagent's \"write\" call"
    events = [
        event(
            0,
            "tool/result",
            call_id="1",
            name="write",
            content=READ_ONLY_DENIAL
            + "\nEscalation is unavailable in this session (approvals are disabled).",
            is_error=True,
        ),
        event(
            1, "tool/result", call_id="2", name="read", content="Error: no such file", is_error=True
        ),
    ]
    assert last_denial(events) == f"denied: write ({READ_ONLY_DENIAL.removeprefix('Error: ')})"
    events.append(event(2, "tool/result", call_id="3", name="write", content=routed, is_error=True))
    assert last_denial(events) == (
        "denied: write (the root session's user rejected this subagent's \"write\" call)"
    )
    events.append(
        event(3, "tool/result", call_id="4", name="write", content="Wrote it", is_error=False)
    )
    assert last_denial(events) is not None  # the most recent *denial*, not the last result
    for content in (
        'Error: the user rejected tool "write"',
        'Error: "bash" needs the root session\'s approval, but no approval service is composed',
        'Error: tool "write" requires approval, but no approval channel is available',
    ):
        assert is_denial(content)
    for content in (
        'Error: the routed approval for "write" was cancelled',
        'Error: tool "write" was cancelled',
        "the user rejected",  # not an error result
    ):
        assert not is_denial(content)
