"""Grants and rules in the approval service: each outcome and scope kind, the exact events, the
grant fold on resume, revocation, ``allowed-always`` rules in the user's file, routed questions,
and what rules decide before any answerer (``policy/_approval.py``, ``_permissions.py``)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
from policy_support import ToyAgent, approval_of, compose, layout

from tether.kernel import Next
from tether.kernel._plugin import Kernel
from tether.policy import ApprovalRequest, register_answerer
from tether.policy._approval import Answer, RoutedOrigin
from tether.policy._errors import GrantNotFoundError
from tether.policy._events import GrantScope
from tether.policy._grants import scope_offers, session_grants
from tether.policy._modes import ApprovalOutcome, SandboxMode
from tether.policy._permissions import PERMISSION_RULES, PermissionRules, held_grants, revoke
from tether.policy._rule_store import RuleStore
from tether.policy._rules import CallFacts, RuleOrigin, parse_rule
from tether.session import Session, SessionHeader, SessionMeta, SessionStore
from tether.session.persistence._factory import open_persistence

Asked = list[ApprovalRequest]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    (workspace / "src").mkdir(parents=True)
    return Path(os.path.realpath(workspace))


def composition(
    ws: Path,
    store: SessionStore | None = None,
    *,
    rules: PermissionRules | None = None,
    reply: object = "rejected",
) -> tuple[Kernel, Asked]:
    kernel = compose(store=store, approval={}, sandbox={"workspace_root": str(ws)})
    if rules is not None:
        kernel.ctx.provide(PERMISSION_RULES, rules)
    asked: Asked = []

    async def answer(request: ApprovalRequest, _next: Next[Any]) -> Any:
        asked.append(request)
        return reply(request) if callable(reply) else reply

    register_answerer(kernel.ctx, answer)
    return kernel, asked


def new_session(sid: str, ws: Path, *, depth: int = 0, seed: list[Any] | None = None) -> Session:
    return Session(SessionHeader(sid, 0, cwd=str(ws), delegation_depth=depth), seed or [])


def root(ws: Path, store: SessionStore | None = None, sid: str = "root") -> ToyAgent:
    meta = SessionMeta(cwd=str(ws))
    session = store.create(sid, meta=meta) if store is not None else new_session(sid, ws)
    session.append("turn/start", {"turn": 1})
    return ToyAgent(session)


def bash(agent: ToyAgent, command: str, **kw: Any) -> ApprovalRequest:
    return ApprovalRequest(
        agent, "bash", call_id="c", action={"tool": "bash", "command": command}, **kw
    )


def write(agent: ToyAgent, path: str) -> ApprovalRequest:
    return ApprovalRequest(agent, "write", call_id="c", action={"tool": "write", "path": path})


def approval_rows(session: Session, start: int = 0) -> list[tuple[str, dict[str, Any]]]:
    """The approval events from ``start``, with ids replaced by where they point."""
    rows = [(t, dict(d)) for t, d in layout(session, start) if t.startswith("approval/")]
    names: dict[object, str] = {}
    for kind, data in rows:
        for key in ("id", "approval_id", "grant"):
            if key in data:
                data[key] = names.setdefault(data[key], f"<{kind.split('/')[1]}:{len(names)}>")
    return rows


# -- offers -------------------------------------------------------------------------------------
def test_the_offers_are_narrowest_first_and_each_covers_the_call(ws: Path) -> None:
    def offers(**kw: Any) -> list[tuple[str, str]]:
        facts = CallFacts(workspace=str(ws), home="/home/me", **kw)
        found = scope_offers(facts)
        assert all(
            parse_rule(o.rule, "allow", RuleOrigin.SESSION, escalate=o.target_mode).covers(facts)
            for o in found
        )
        return [(o.kind, o.rule) for o in found]

    assert offers(tool="bash", command="npm test --watch") == [
        ("exact", "Bash(npm test --watch)"),
        ("prefix", "Bash(npm test:*)"),
        ("prefix", "Bash(npm:*)"),
        ("tool", "Bash"),
    ]
    assert offers(tool="bash", command="ls") == [
        ("exact", "Bash(ls)"),
        ("prefix", "Bash(ls:*)"),
        ("tool", "Bash"),
    ]
    # a compound command offers no prefix; a * in it, no exact rule (it would be a wildcard)
    assert offers(tool="bash", command="make && rm -rf x") == [
        ("exact", "Bash(make && rm -rf x)"),
        ("tool", "Bash"),
    ]
    assert offers(tool="bash", command="ls *.py") == [("prefix", "Bash(ls:*)"), ("tool", "Bash")]
    # a first word that is not the program that runs offers no prefix: it would cover any
    # program (`timeout 5 rm -rf ~` under "Bash(timeout 5:*)")
    for command in (
        "FOO=1 make", "timeout 5 make", "env ls", "/usr/bin/sudo rm x", "xargs rm", "bash -c ls",
        "sh script.sh", "eval ls", "exec ls", "command ls", "nice -n 5 make", "trap ls EXIT",
        ". ./env.sh", "source env.sh", "time make",
    ):  # fmt: skip
        assert offers(tool="bash", command=command) == [
            ("exact", f"Bash({command})"),
            ("tool", "Bash"),
        ], command
    assert offers(tool="write", path="src/a.py") == [
        ("exact", "Write(./src/a.py)"),
        ("path", "Write(./src/**)"),
        ("tool", "Write"),
    ]
    assert offers(tool="edit", path="top.txt") == [
        ("exact", "Edit(./top.txt)"),
        ("path", "Edit(./**)"),
        ("tool", "Edit"),
    ]
    assert offers(tool="write", path="/tmp/x/a[1].txt") == [
        ("exact", "Write(//tmp/x/a[[]1].txt)"),
        ("path", "Write(//tmp/x/**)"),
        ("tool", "Write"),
    ]
    assert offers(tool="mcp__srv__do") == [("tool", "mcp__srv__do")]
    escalated = scope_offers(
        CallFacts("bash", "make", None, SandboxMode.DANGER_FULL_ACCESS, str(ws), "/h")
    )
    assert {o.target_mode for o in escalated} == {SandboxMode.DANGER_FULL_ACCESS}


# -- allowed-for-session -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kind", "rule", "covered", "not_covered"),
    [
        ("exact", "Bash(npm test --watch)", "npm test --watch", "npm test"),
        ("prefix", "Bash(npm test:*)", "npm test --ci", "npm test; rm -rf ~"),
        ("tool", "Bash", "anything at all", None),
    ],
)
async def test_a_session_grant_of_each_command_kind(
    ws: Path, kind: str, rule: str, covered: str, not_covered: str | None
) -> None:
    kernel, asked = composition(ws, reply=Answer("allowed-for-session", "me", kind))  # type: ignore[arg-type]
    service = approval_of(kernel)
    agent = root(ws)
    assert (
        await service.request(bash(agent, "npm test --watch"))
        is ApprovalOutcome.ALLOWED_FOR_SESSION
    )
    scope = {"kind": kind, "rule": rule}
    assert approval_rows(agent.session) == [
        ("approval/asked", {"id": "<asked:0>", "tool_name": "bash", "call_id": "c",
                            "action": {"tool": "bash", "command": "npm test --watch"}}),
        ("approval/decided", {"id": "<asked:0>", "outcome": "allowed-for-session",
                              "answered_by": "me", "scope": scope}),
        ("approval/grant", {"id": "<grant:1>", "approval_id": "<asked:0>",
                            "outcome": "allowed-for-session", "scope": scope, "granted_by": "me"}),
    ]  # fmt: skip
    assert await service.request(bash(agent, covered)) is ApprovalOutcome.ALLOWED_ONCE
    assert len(asked) == 1  # decided by the grant: nobody was asked
    assert approval_rows(agent.session)[3:] == [
        ("approval/asked", {"id": "<asked:2>", "tool_name": "bash", "call_id": "c",
                            "action": {"tool": "bash", "command": covered}}),
        ("approval/decided", {"id": "<asked:2>", "outcome": "allowed-once", "decided_by": "grant",
                              "grant": "<grant:1>", "scope": scope}),
    ]  # fmt: skip
    if not_covered is not None:
        await service.request(bash(agent, not_covered))
        assert len(asked) == 2


async def test_a_session_grant_of_a_path_and_its_default_scope(ws: Path) -> None:
    kernel, asked = composition(ws, reply=Answer("allowed-for-session", "me", "path"))
    service = approval_of(kernel)
    agent = root(ws)
    await service.request(write(agent, "src/a.py"))
    assert [g.scope for g in session_grants(agent.session)] == [
        GrantScope("path", "Write(./src/**)")
    ]
    assert await service.request(write(agent, "src/deep/b.py")) is ApprovalOutcome.ALLOWED_ONCE
    assert await service.request(write(agent, "other.py")) is ApprovalOutcome.ALLOWED_FOR_SESSION
    assert len(asked) == 2  # not covered: asked
    # an answer without a scope takes the narrowest
    kernel, _ = composition(ws, reply="allowed-for-session")
    other = root(ws, sid="other")
    await approval_of(kernel).request(write(other, "src/a.py"))
    assert [g.scope for g in session_grants(other.session)] == [
        GrantScope("exact", "Write(./src/a.py)")
    ]


@pytest.mark.parametrize(
    "scope",
    [
        "prefix",  # not offered for a compound command
        "everything",
        GrantScope("prefix", "Bash(make:*)"),  # looks like an offer, is not one
        GrantScope("tool", "Bash", SandboxMode.DANGER_FULL_ACCESS),  # wider than offered
    ],
)
async def test_a_scope_that_was_not_offered_is_refused_not_narrowed(ws: Path, scope: Any) -> None:
    kernel, _ = composition(ws, reply=Answer("allowed-for-session", "me", scope))
    agent = root(ws)
    outcome = await approval_of(kernel).request(bash(agent, "make && rm -rf x"))
    assert outcome is ApprovalOutcome.UNAVAILABLE
    decided = approval_rows(agent.session)[-1]
    assert decided[0] == "approval/decided" and decided[1]["outcome"] == "unavailable"
    assert decided[1]["failure"]["kind"] == "scope-not-offered"
    assert decided[1]["answered_by"] == "me"
    assert session_grants(agent.session) == []


async def test_allowed_always_is_not_offered_without_a_rule_store(ws: Path) -> None:
    kernel, asked = composition(ws, reply="allowed-always")
    agent = root(ws)
    assert await approval_of(kernel).request(bash(agent, "ls")) is ApprovalOutcome.UNAVAILABLE
    assert asked[0].choices is not None and not asked[0].choices.always
    assert approval_rows(agent.session)[-1][1]["failure"] == {
        "kind": "scope-not-offered",
        "excerpt": "allowed-always was not offered (no rule store is composed)",
    }


# -- allowed-always ------------------------------------------------------------------------------
def user_rules(ws: Path) -> PermissionRules:
    return PermissionRules(workspace=str(ws), store=RuleStore.for_user())


async def test_allowed_always_keeps_a_rule_in_the_users_own_file(ws: Path) -> None:
    rules = user_rules(ws)
    kernel, _asked = composition(ws, rules=rules, reply=Answer("allowed-always", "me", "prefix"))
    agent = root(ws)
    assert (
        await approval_of(kernel).request(bash(agent, "npm test x"))
        is ApprovalOutcome.ALLOWED_ALWAYS
    )
    [stored] = RuleStore.for_user().get(str(ws)).rules
    assert (stored.rule, stored.escalate, stored.session, stored.granted_by) == (
        "Bash(npm test:*)",
        None,
        "root",
        "me",
    )
    path = RuleStore.for_user().path_for(str(ws))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert not any(p.name.endswith(".json") for p in ws.rglob("*"))  # never in the workspace
    grant = approval_rows(agent.session)[-1]
    assert grant == (
        "approval/grant",
        {"id": "<grant:1>", "approval_id": "<asked:0>", "outcome": "allowed-always",
         "scope": {"kind": "prefix", "rule": "Bash(npm test:*)"}, "granted_by": "me",
         "rule_id": stored.id},
    )  # fmt: skip
    assert session_grants(agent.session) == []  # the rule decides, not the log
    # a new session of the workspace (another composition) is decided by the rule
    kernel2, asked2 = composition(ws, rules=user_rules(ws))
    fresh = root(ws, sid="fresh")
    assert (
        await approval_of(kernel2).request(bash(fresh, "npm test y"))
        is ApprovalOutcome.ALLOWED_ONCE
    )
    assert asked2 == []
    decided = approval_rows(fresh.session)[-1][1]
    assert decided["decided_by"] == "rule"
    assert decided["rule"] == {
        "decision": "allow", "rule": "Bash(npm test:*)", "origin": "always", "file": str(path)
    }  # fmt: skip
    # revoked from elsewhere, it stops deciding at once
    assert revoke(user_rules(ws), None, stored.id[:6], by="test").kind == "always"
    await approval_of(kernel2).request(bash(fresh, "npm test z"))
    assert len(asked2) == 1


async def test_an_always_rule_that_cannot_be_kept_holds_for_the_session(ws: Path) -> None:
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "tether" / "permission-rules"
    config.mkdir(parents=True)
    config.chmod(0o777)  # open to others: never used
    kernel, _ = composition(ws, rules=user_rules(ws), reply="allowed-always")
    agent = root(ws)
    await approval_of(kernel).request(bash(agent, "ls"))
    grant = approval_rows(agent.session)[-1][1]
    assert grant["outcome"] == "allowed-always" and "rule_id" not in grant
    assert "is not private to you" in grant["error"]
    assert [g.scope.rule for g in session_grants(agent.session)] == ["Bash(ls)"]


# -- resume and revocation ---------------------------------------------------------------------
async def test_the_grant_fold_survives_cold_resume_and_revocation(ws: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'g.db'}"
    store = SessionStore(open_persistence(url))
    kernel, _asked = composition(ws, store, reply=Answer("allowed-for-session", "me", "prefix"))
    agent = root(ws, store)
    await approval_of(kernel).request(bash(agent, "git status -s"))
    agent.session.append("turn/end", {"turn": 1, "reason": "completed"})
    await store.close()

    store2 = SessionStore(open_persistence(url))
    kernel2, asked2 = composition(ws, store2)
    resumed = ToyAgent(await store2.open("root"))
    resumed.session.append("turn/start", {"turn": 2})
    assert (
        await approval_of(kernel2).request(bash(resumed, "git status"))
        is ApprovalOutcome.ALLOWED_ONCE
    )
    assert asked2 == []
    [held] = held_grants(None, resumed.session)
    assert (held.kind, held.rule, held.by) == ("session", "Bash(git status:*)", "me")
    revoked = revoke(None, resumed.session, held.id[:8], by="tether chat")
    assert revoked.id == held.id
    assert layout(resumed.session, len(resumed.session) - 1) == [
        ("approval/grant-revoked", {"id": held.id, "by": "tether chat"})
    ]
    assert (
        await approval_of(kernel2).request(bash(resumed, "git status")) is ApprovalOutcome.REJECTED
    )
    assert len(asked2) == 1
    with pytest.raises(GrantNotFoundError) as info:
        revoke(None, resumed.session, held.id, by="x")
    assert info.value.code == "GRANT_NOT_FOUND"
    await store2.close()


async def test_a_child_holds_no_grant_even_with_grant_events_in_its_log(ws: Path) -> None:
    kernel, _asked = composition(ws, reply=Answer("allowed-for-session", "me", "tool"))
    parent = root(ws)
    await approval_of(kernel).request(bash(parent, "ls"))
    grant_event = parent.session.last("approval/grant")
    assert grant_event is not None
    child = ToyAgent(new_session("child", ws, depth=1, seed=list(parent.session.events)))
    assert session_grants(child.session) == []


# -- routed questions ------------------------------------------------------------------------------
async def test_a_grant_made_by_a_routed_question_is_the_roots_and_never_the_childs(
    ws: Path,
) -> None:
    kernel, asked = composition(ws, reply=Answer("allowed-for-session", "me", "prefix"))
    service = approval_of(kernel)
    the_root = root(ws)
    child = ToyAgent(new_session("child", ws, depth=1))
    child.session.append("turn/start", {"turn": 1})

    def routed(command: str) -> ApprovalRequest:
        origin = RoutedOrigin(child, "c", "bash", command, ("child", "root"))
        return bash(the_root, command, origin=origin)

    assert await service.request(routed("make all")) is ApprovalOutcome.ALLOWED_FOR_SESSION
    assert [t for t, _ in approval_rows(child.session)] == ["approval/asked", "approval/decided"]
    grant = the_root.session.last("approval/grant")
    assert grant is not None and grant.data["asked_in"] == "child"
    # the child's next question is asked again; the root's own is decided by the grant
    await service.request(routed("make all"))
    assert len(asked) == 2
    assert await service.request(bash(the_root, "make all -j2")) is ApprovalOutcome.ALLOWED_ONCE
    assert len(asked) == 2


# -- rules in the service ------------------------------------------------------------------------
def configured(*rules: tuple[str, str]) -> PermissionRules:
    return PermissionRules(
        [parse_rule(text, decision, RuleOrigin.USER, file="u.toml") for decision, text in rules]  # type: ignore[arg-type]
    )


async def test_an_ask_rule_offers_no_grant_and_no_grant_or_allow_skips_it(ws: Path) -> None:
    rules = configured(("ask", "Bash(git push:*)"), ("allow", "Bash"))
    kernel, asked = composition(ws, rules=rules, reply="allowed-for-session")
    agent = root(ws)
    assert await approval_of(kernel).request(bash(agent, "git push")) is ApprovalOutcome.UNAVAILABLE
    assert asked[0].choices is None
    assert await approval_of(kernel).request(bash(agent, "ls")) is ApprovalOutcome.ALLOWED_ONCE
    assert len(asked) == 1


async def test_a_deny_rule_rejects_before_any_answerer_with_the_rule_recorded(ws: Path) -> None:
    rules = configured(("deny", "Bash(curl:*)"), ("allow", "Bash(curl:*)"))
    kernel, asked = composition(ws, rules=rules, reply="allowed-once")
    agent = root(ws)
    decided = await approval_of(kernel).decide(bash(agent, "ls && curl x | sh"))
    assert decided.outcome is ApprovalOutcome.REJECTED and asked == []
    assert approval_rows(agent.session)[-1] == (
        "approval/decided",
        {"id": "<asked:0>", "outcome": "rejected", "decided_by": "rule",
         "rule": {"decision": "deny", "rule": "Bash(curl:*)", "origin": "user", "file": "u.toml"}},
    )  # fmt: skip


async def test_screen_refuses_a_call_that_would_not_ask_and_audits_it(ws: Path) -> None:
    rules = configured(("deny", "Read(./secrets/**)"), ("ask", "Bash(git:*)"))
    kernel, asked = composition(ws, rules=rules)
    service = approval_of(kernel)
    agent = root(ws)
    request = ApprovalRequest(
        agent, "read", call_id="c", action={"tool": "read", "path": "secrets/k"}
    )
    screened = await service.screen(request)
    assert screened.denied is not None and screened.denied.text == "Read(./secrets/**)"
    assert approval_rows(agent.session) == [
        ("approval/asked", {"id": "<asked:0>", "tool_name": "read", "call_id": "c",
                            "reason": 'deny rule "Read(./secrets/**)" (from u.toml)',
                            "action": {"tool": "read", "path": "secrets/k"}}),
        ("approval/decided", {"id": "<asked:0>", "outcome": "rejected", "decided_by": "rule",
                              "rule": {"decision": "deny", "rule": "Read(./secrets/**)",
                                       "origin": "user", "file": "u.toml"}}),
    ]  # fmt: skip
    start = len(agent.session)
    ask = await service.screen(bash(agent, "git push"))
    assert ask.ask is not None and ask.denied is None and len(agent.session) == start
    assert (await service.screen(bash(agent, "ls"))) == type(ask)()
    assert asked == []


async def test_a_grant_decides_under_never_but_a_child_is_never_allowed(ws: Path) -> None:
    rules = configured(("allow", "Bash(ls:*)"))
    kernel, asked = composition(ws, rules=rules, reply="allowed-once")
    service = approval_of(kernel)
    agent = root(ws)
    service.set_approval_policy(agent.session, "never")
    assert await service.request(bash(agent, "ls -la")) is ApprovalOutcome.ALLOWED_ONCE
    assert await service.request(bash(agent, "pwd")) is ApprovalOutcome.REJECTED
    child = ToyAgent(new_session("child", ws, depth=1))
    child.session.append("turn/start", {"turn": 1})
    service.set_approval_policy(child.session, "never", "delegation")
    assert await service.request(bash(child, "ls -la")) is ApprovalOutcome.REJECTED
    assert asked == []


async def test_a_grant_for_an_escalation_covers_it_and_narrower_never_wider(ws: Path) -> None:
    kernel, asked = composition(ws, reply=Answer("allowed-for-session", "me", "prefix"))
    service = approval_of(kernel)
    agent = root(ws)
    ww, full = SandboxMode.WORKSPACE_WRITE, SandboxMode.DANGER_FULL_ACCESS
    assert await service.request(bash(agent, "make all", target_mode=ww)) is (
        ApprovalOutcome.ALLOWED_FOR_SESSION
    )
    [grant] = session_grants(agent.session)
    assert grant.scope == GrantScope("prefix", "Bash(make all:*)", ww)
    assert await service.request(bash(agent, "make all -j", target_mode=ww)) is (
        ApprovalOutcome.ALLOWED_ONCE
    )
    assert await service.request(bash(agent, "make all")) is ApprovalOutcome.ALLOWED_ONCE
    assert len(asked) == 1
    await service.request(bash(agent, "make all", target_mode=full))  # wider: asked
    assert len(asked) == 2
    # a grant without a target mode never decides an escalation
    plain_kernel, plain_asked = composition(ws, reply=Answer("allowed-for-session", "me", "tool"))
    other = root(ws, sid="other")
    await approval_of(plain_kernel).request(bash(other, "ls"))
    await approval_of(plain_kernel).request(bash(other, "ls", target_mode=ww))
    assert len(plain_asked) == 2
