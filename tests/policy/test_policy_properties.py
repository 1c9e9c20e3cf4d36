"""Property tests: policy replay after a store round trip, and approval never grants wrongly."""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from policy_support import (
    MemoryPersistence,
    ToyAgent,
    approval_of,
    compose,
    presets_of,
    sandbox_of,
)

from tether._signals import AbortSignal
from tether.kernel import Next
from tether.kernel._plugin import Kernel
from tether.policy import (
    ApprovalOutcome,
    ApprovalPolicy,
    ApprovalRequest,
    ApprovalService,
    PermissionPresetsService,
    SandboxMode,
    SandboxPolicyService,
    register_answerer,
)
from tether.policy._approval import fold_approval_policy
from tether.policy._errors import ApprovalOutsideTurnError
from tether.policy._modes import allows
from tether.policy._presets import DEFAULT_PRESET_TABLE, derive_preset
from tether.policy._sandbox_policy import fold_sandbox_mode
from tether.session import Event, Session, SessionStore
from tether.session.persistence._factory import open_persistence

MODES = [m.value for m in SandboxMode]
POLICIES = [p.value for p in ApprovalPolicy]
SOURCES = [None, "delegation", "parent"]
PRESETS = list(DEFAULT_PRESET_TABLE)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- (a) any interleaving of switches replays to the same effective policy ---------------------
switch = st.one_of(
    st.tuples(st.just("mode"), st.sampled_from(MODES), st.sampled_from(SOURCES)),
    st.tuples(st.just("policy"), st.sampled_from(POLICIES), st.sampled_from(SOURCES)),
    st.tuples(st.just("set_policy"), st.sampled_from(POLICIES)),
    st.tuples(st.just("preset"), st.sampled_from(PRESETS)),
    st.tuples(st.just("turn")),
)


@dataclass
class Composition:
    kernel: Kernel
    sandbox: SandboxPolicyService
    approval: ApprovalService
    presets: PermissionPresetsService | None


def composition(
    store: SessionStore, default_mode: str, config_policy: str, with_presets: bool
) -> Composition:
    kernel = compose(
        store=store,
        sandbox={"mode": default_mode},
        approval={"policy": config_policy},
        presets={} if with_presets else None,
    )
    return Composition(
        kernel,
        sandbox_of(kernel),
        approval_of(kernel),
        presets_of(kernel) if with_presets else None,
    )


def effective(c: Composition, session: Session) -> tuple[SandboxMode, ApprovalPolicy, str]:
    mode = c.sandbox.resolve(session).mode
    policy = c.approval.effective_policy(session)
    name = derive_preset(
        session.events, sandbox_default=c.sandbox.default_mode, approval_default=c.approval.policy
    )
    if c.presets is not None:
        assert c.presets.current(session) == name
    return mode, policy, name


@SETTINGS
@given(
    ops=st.lists(switch, max_size=25),
    default_mode=st.sampled_from(MODES),
    config_policy=st.sampled_from(POLICIES),
    with_presets=st.booleans(),
    resume_mode=st.sampled_from(MODES),
    resume_policy=st.sampled_from(POLICIES),
)
def test_any_interleaving_of_switches_replays_after_a_store_round_trip(
    ops: list[tuple[Any, ...]],
    default_mode: str,
    config_policy: str,
    with_presets: bool,
    resume_mode: str,
    resume_policy: str,
) -> None:
    with tempfile.TemporaryDirectory() as root:
        url = f"jsonl://{root}/store"
        asyncio.run(
            _replay(url, ops, default_mode, config_policy, with_presets, resume_mode, resume_policy)
        )


async def _replay(
    url: str,
    ops: list[tuple[Any, ...]],
    default_mode: str,
    config_policy: str,
    with_presets: bool,
    resume_mode: str,
    resume_policy: str,
) -> None:
    store = SessionStore(open_persistence(url))
    live = composition(store, default_mode, config_policy, with_presets)
    agent = ToyAgent(store.create("s1"))
    # The model: what the user last asked for, else what the deployment (or pinning) says.
    mode = SandboxMode(default_mode)
    policy = ApprovalPolicy(config_policy)
    if with_presets:
        mode, policy = SandboxMode.WORKSPACE_WRITE, ApprovalPolicy.ASK
    # One completed turn up front: the store writes a session only once it has an event.
    agent.session.append("turn/start", {"turn": 1})
    agent.session.append("turn/end", {"turn": 1, "reason": "completed"})
    turn = 1
    for op in ops:
        if op[0] == "mode":
            live.sandbox.set_sandbox_mode(agent.session, op[1], op[2])
            mode = SandboxMode(op[1])
        elif op[0] == "policy":
            live.approval.set_approval_policy(agent.session, op[1], op[2])
            policy = ApprovalPolicy(op[1])
        elif op[0] == "set_policy":
            live.approval.set_policy(agent, op[1])
            policy = ApprovalPolicy(op[1])
        elif op[0] == "preset":
            if live.presets is None:
                continue
            live.presets.set_preset(agent, op[1])
            row = DEFAULT_PRESET_TABLE[op[1]]
            mode, policy = row.sandbox, row.approval
        elif agent.session.has_open_turn():
            agent.session.append("turn/end", {"turn": turn, "reason": "completed"})
        else:
            turn += 1
            agent.session.append("turn/start", {"turn": turn})
    before = effective(live, agent.session)
    assert before[:2] == (mode, policy)
    await store.close()

    # Round trip 1: the log on disk, reopened by a fresh store under the same deployment.
    store2 = SessionStore(open_persistence(url))
    again = composition(store2, default_mode, config_policy, with_presets)
    resumed = await store2.open("s1")
    assert effective(again, resumed) == before
    assert again.sandbox.override_of(resumed) == live.sandbox.override_of(agent.session)
    assert again.approval.override_of(resumed) == live.approval.override_of(agent.session)

    # Round trip 2: the events through their dict form, folded purely.
    replayed = [Event.from_dict(e.to_dict()) for e in agent.session.events]
    assert replayed == list(agent.session.events)
    assert fold_sandbox_mode(replayed) == live.sandbox.override_of(agent.session)
    assert fold_approval_policy(replayed) == live.approval.override_of(agent.session)

    await store2.close()

    # A pinned session does not depend on the deployment it is resumed under.
    if with_presets:
        store3 = SessionStore(open_persistence(url))
        other = composition(store3, resume_mode, resume_policy, with_presets)
        elsewhere = await store3.open("s1")
        assert effective(other, elsewhere)[:2] == before[:2]
        await store3.close()


# -- (b) the approval service never grants unless an answerer did, under ask, in a turn ---------
BEHAVIOURS = ["next", "raise_sync", "raise_async", "garbage", "hang", *list(ApprovalOutcome)]

answerer = st.tuples(st.sampled_from(BEHAVIOURS), st.sampled_from(["global", "agent", "foreign"]))


@SETTINGS
@given(
    config_policy=st.sampled_from(POLICIES),
    override=st.sampled_from([None, *POLICIES]),
    turn_state=st.sampled_from(["none", "open", "closed"]),
    pre_aborted=st.booleans(),
    answerers=st.lists(answerer, max_size=4),
)
def test_approval_never_grants_unless_an_answerer_did_under_ask_in_an_open_turn(
    config_policy: str,
    override: str | None,
    turn_state: str,
    pre_aborted: bool,
    answerers: list[tuple[str, str]],
) -> None:
    asyncio.run(_ask(config_policy, override, turn_state, pre_aborted, answerers))


async def _ask(
    config_policy: str,
    override: str | None,
    turn_state: str,
    pre_aborted: bool,
    answerers: list[tuple[Any, str]],
) -> None:
    persistence = MemoryPersistence(append_yields=2)
    store = SessionStore(persistence)
    kernel = compose(store=store, approval={"policy": config_policy})
    service = approval_of(kernel)
    agent = ToyAgent(store.create("s1"))
    foreign = ToyAgent(store.create("s2"))
    if override is not None:
        service.set_approval_policy(agent.session, override)
    if turn_state != "none":
        agent.session.append("turn/start", {"turn": 1})
    if turn_state == "closed":
        agent.session.append("turn/end", {"turn": 1, "reason": "completed"})

    calls: list[int] = []
    granted_by_answerer: list[int] = []
    hang_started = asyncio.Event()

    def make(index: int, behaviour: Any) -> Any:
        async def fn(req: ApprovalRequest, next: Next) -> Any:
            calls.append(index)
            if behaviour == "next":
                return await next()
            if behaviour == "raise_async":
                await asyncio.sleep(0)
                raise RuntimeError("async")
            if behaviour == "garbage":
                return {"outcome": "allowed-once"}
            if behaviour == "hang":
                hang_started.set()
                await asyncio.Event().wait()
            if allows(behaviour):
                granted_by_answerer.append(index)
            return behaviour.value

        if behaviour == "raise_sync":  # raises before any await: the synchronous failure path

            def sync_fn(req: ApprovalRequest, next: Next) -> Any:
                calls.append(index)
                raise RuntimeError("sync")

            return sync_fn
        return fn

    scopes = {"global": None, "agent": agent, "foreign": foreign}
    for index, (behaviour, scope) in enumerate(answerers):
        register_answerer(kernel.ctx, make(index, behaviour), scope=scopes[scope])

    signal = AbortSignal()
    if pre_aborted:
        signal.abort("pre")

    async def abort_when_hanging() -> None:
        await hang_started.wait()
        signal.abort("user")

    watcher = asyncio.create_task(abort_when_hanging())
    before = len(agent.session)
    try:
        outcome = await service.request(ApprovalRequest(agent, "bash", call_id="c", signal=signal))
    except ApprovalOutsideTurnError:
        assert turn_state != "open"
        assert len(agent.session) == before
        assert calls == []
        return
    finally:
        watcher.cancel()
    assert turn_state == "open"

    # The oracle: what §3.2 says the outcome must be.
    effective = ApprovalPolicy(override or config_policy)
    in_scope = [(i, b) for i, (b, s) in enumerate(answerers) if s != "foreign"]
    if pre_aborted:
        expected: ApprovalOutcome = ApprovalOutcome.CANCELLED
        expected_calls: list[int] = []
    elif effective is ApprovalPolicy.NEVER:
        expected, expected_calls = ApprovalOutcome.REJECTED, []
    else:
        expected, expected_calls = ApprovalOutcome.UNAVAILABLE, []
        for index, behaviour in in_scope:
            expected_calls.append(index)
            if behaviour == "next":
                continue
            if behaviour == "hang":
                expected = ApprovalOutcome.CANCELLED
            elif behaviour is ApprovalOutcome.ALLOWED_ALWAYS:
                expected = ApprovalOutcome.UNAVAILABLE  # no rule store: always is not offered
            elif isinstance(behaviour, ApprovalOutcome):
                expected = behaviour
            break
    assert outcome is expected
    assert calls == expected_calls

    # The property itself, stated without the oracle.
    if allows(outcome):
        assert effective is ApprovalPolicy.ASK
        assert not pre_aborted
        assert granted_by_answerer
        assert all(answerers[i][1] != "foreign" for i in granted_by_answerer)

    # The pair is audited and durable by the time request() returned (with the grant an
    # answer for the session made, after it).
    asked, decided, *granted = agent.session.events[before:]
    assert (asked.type, decided.type) == ("approval/asked", "approval/decided")
    assert asked.data["id"] == decided.data["id"]
    assert decided.data["outcome"] == outcome.value
    grants = [{"type": "approval/grant", "approval_id": asked.data["id"]}]
    expect_grant = outcome is ApprovalOutcome.ALLOWED_FOR_SESSION
    assert [{"type": e.type, "approval_id": e.data["approval_id"]} for e in granted] == (
        grants if expect_grant else []
    )
    stored = await persistence.inspect("s1")
    assert stored.events[-1] == agent.session.events[-1]
    await store.close()
