"""Children and permission rules (``docs/decisions/0056``): a delegated child is bound by every
``deny`` and ``ask`` rule its parent was bound by, captured into its log at delegation, and by
no ``allow`` rule or grant: not one the parent had, not one it gains later, not after a cold
resume under a configuration that no longer has the rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from subagent_support import NEVER, World, child, delegated, pre_turn, settle, stored, subagents
from subagent_support import world as make_world

from script_support import write
from tether.agent import Agent
from tether.agent._agent import AgentOptions
from tether.kernel import Next
from tether.plugins._ask_tools import plugin as ask_tools
from tether.policy import ApprovalRequest, register_answerer
from tether.policy._approval import Answer
from tether.policy._permissions import PERMISSION_RULES, PermissionRules
from tether.policy._rules import RuleOrigin, parse_rule

RULES = PermissionRules(
    [
        parse_rule("Write(./secret/**)", "deny", RuleOrigin.USER, file="/u/tether.toml"),
        parse_rule("Write(./ok/**)", "allow", RuleOrigin.USER, file="/u/tether.toml"),
        parse_rule("Write(./ask/**)", "ask", RuleOrigin.USER, file="/u/tether.toml"),
    ]
)
CAPTURED = (
    "permission/rules",
    {
        "rules": [
            {
                "decision": "deny",
                "rule": "Write(./secret/**)",
                "origin": "user",
                "file": "/u/tether.toml",
            },
            {
                "decision": "ask",
                "rule": "Write(./ask/**)",
                "origin": "user",
                "file": "/u/tether.toml",
            },
        ],
        "source": "delegation",
    },
)
DENIED = (
    'Error: tool "write" is refused by the deny rule "Write(./secret/**)" (captured at '
    "delegation from /u/tether.toml)"
)
REJECTED = 'Error: the user rejected tool "write"'


def compose(
    tmp_path: Path, agents: list[dict[str, Any]], *, rules: bool
) -> tuple[World, list[str]]:
    w = make_world(tmp_path, agents)
    if rules:
        w.ctx.provide(PERMISSION_RULES, RULES)
    w.kernel.load(ask_tools, {"tools": ["write"]})
    asked: list[str] = []

    async def answer(request: ApprovalRequest, _next: Next[Any]) -> Answer:
        asked.append(request.agent.session.id)
        return Answer("allowed-for-session", "the user", "tool")

    register_answerer(w.ctx, answer)
    return w, asked


def results(events: Any) -> list[str]:
    return [str(e.data["content"]) for e in events if e.type == "tool/result"]


def decisions(events: Any) -> list[dict[str, Any]]:
    return [dict(e.data) for e in events if e.type == "approval/decided"]


async def test_a_child_is_bound_by_deny_and_ask_rules_and_never_by_allow_rules_or_grants(
    tmp_path: Path,
) -> None:
    script = [
        {
            "match": {"depth": 0},
            "steps": [write("ok/a.txt"), write("top.txt"), {"text": "parent done"}]
            + [{"text": "noted"}] * 6,
        },
        child(
            [
                {"text": "ready"},
                write("ok/b.txt"),
                write("top2.txt"),
                write("secret/s.txt"),
                write("ask/q.txt"),
                {"text": "all refused"},
                write("secret/t.txt"),
                write("ok/c.txt"),
                {"text": "still refused"},
            ]
        ),
    ]
    w, asked = compose(tmp_path, script, rules=True)
    manager = subagents(w)
    parent = w.root(mode="workspace-write")
    child_id = await manager.start(parent, "get ready", label="probe")
    await settle(w)
    durable = await stored(w, child_id)
    assert pre_turn(durable.events)[2:] == [delegated("workspace-write"), NEVER, CAPTURED]

    # After the delegation the parent gains a grant (any write) and uses its allow rule.
    await parent.run("write things")
    assert results(parent.session.events) == [
        "Wrote 1 byte to ok/a.txt",
        "Wrote 1 byte to top.txt",
    ]
    assert asked == [parent.id]  # ok/a.txt by the allow rule, top.txt by the user
    grant_decision = decisions(parent.session.events)
    assert grant_decision[0]["decided_by"] == "rule"
    assert grant_decision[1]["outcome"] == "allowed-for-session"

    await manager.followup(parent, child_id, "write them")
    await settle(w)
    durable = await stored(w, child_id)
    assert results(durable.events) == [REJECTED, REJECTED, DENIED, REJECTED]
    assert [d["outcome"] for d in decisions(durable.events)] == ["rejected"] * 4
    assert [d.get("decided_by") for d in decisions(durable.events)] == [None, None, "rule", None]
    assert asked == [parent.id]  # the child's asks never reached an answerer
    for name in ("ok/b.txt", "top2.txt", "secret/s.txt", "ask/q.txt"):
        assert not (w.workspace / name).exists(), name
    assert not any(e.type == "approval/grant" for e in durable.events)

    # Cold resume under a configuration without any rule: the captured ones still bind.
    await w.store.close()
    w2, asked2 = compose(tmp_path, script, rules=False)
    manager2 = subagents(w2)
    resumed_parent = Agent(
        w2.ctx, await w2.store.open(parent.id), AgentOptions(w2.model), tools=w2.tools
    )
    w2.agents.register(resumed_parent)
    await manager2.followup(resumed_parent, child_id, "try again")
    await settle(w2)
    durable = await stored(w2, child_id)
    assert results(durable.events)[4:] == [DENIED, REJECTED]
    assert not (w2.workspace / "secret" / "t.txt").exists()
    assert not (w2.workspace / "ok" / "c.txt").exists()
    assert asked2 == []
    # The resume appended nothing to the child's scope: the capture is still the one event.
    assert [e.type for e in durable.events].count("permission/rules") == 1


async def test_a_parent_without_deny_or_ask_rules_gives_its_child_no_rules_event(
    tmp_path: Path,
) -> None:
    w, _ = compose(
        tmp_path, [{"match": {"depth": 0}, "steps": []}, child([{"text": "x"}])], rules=False
    )
    manager = subagents(w)
    parent = w.root()
    child_id = await manager.start(parent, "go", label="probe")
    await settle(w)
    durable = await stored(w, child_id)
    assert not any(e.type == "permission/rules" for e in durable.events)
