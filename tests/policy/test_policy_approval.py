"""Approval service (``approval.spec``)."""

from __future__ import annotations

import asyncio
import gc
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from policy_support import (
    MemoryPersistence,
    SessionOnlyAgent,
    ToyAgent,
    approval_of,
    close_turn,
    compose,
    layout,
    open_turn,
)
from policy_support import approval_of as service_of

from tether._signals import AbortSignal
from tether.kernel import SESSIONS_SERVICE, Next, PluginConfigError
from tether.kernel._config import resolve_plugin
from tether.kernel._plugin import Kernel
from tether.policy import (
    APPROVAL_SERVICE,
    ApprovalOutcome,
    ApprovalPolicy,
    ApprovalRequest,
    ApprovalService,
    register_answerer,
)
from tether.policy._approval import AskedAction, approval_plugin, fold_approval_policy
from tether.policy._errors import (
    ApprovalOutsideTurnError,
    InvalidPolicyConfigError,
    InvalidPolicyError,
    InvalidSourceError,
)
from tether.policy._modes import GRANTING, SandboxMode
from tether.session import Event, PersistenceError, Session, SessionHeader, SessionStore
from tether.session.persistence._factory import open_persistence

NEVER_TEXT = (
    "Approval prompts are disabled in this session. Actions that need approval are rejected "
    "automatically, so do not request sandbox escalation (do not set `sandbox_permissions`)."
)
ASK_TEXT = (
    "Approval policy: ask. Operations that need approval may ask through the configured "
    "answerers; without one, the request fails closed."
)


def new_agent(session_id: str = "s1") -> ToyAgent:
    return ToyAgent(Session(SessionHeader(session_id, 0)))


def turn_agent(session_id: str = "s1") -> ToyAgent:
    agent = new_agent(session_id)
    open_turn(agent.session)
    return agent


def audit(session: Session, start: int = 0) -> list[tuple[str, object]]:
    """The approval events from ``start``, with the shared id checked and then elided."""
    events = [e for e in session.events[start:] if e.type.startswith("approval/")]
    ids = {e.data["id"] for e in events if e.type in ("approval/asked", "approval/decided")}
    for request_id in ids:
        assert uuid.UUID(str(request_id)).version == 4
    rows = layout(session, start)
    return [
        (kind, {k: v for k, v in data.items() if k != "id"})  # type: ignore[attr-defined]
        for kind, data in rows
        if kind.startswith("approval/")
    ]


def answer(
    outcome: object, calls: list[str] | None = None, label: str = ""
) -> Callable[[ApprovalRequest, Next], object]:
    def fn(req: ApprovalRequest, next: Next) -> object:
        if calls is not None:
            calls.append(label)
        return outcome

    return fn


def delegate(calls: list[str], label: str) -> Callable[[ApprovalRequest, Next], Awaitable[Any]]:
    async def fn(req: ApprovalRequest, next: Next) -> Any:
        calls.append(label)
        return await next()

    return fn


# -- turn enclosure ----------------------------------------------------------------------------
async def test_an_idle_ask_throws_before_appending() -> None:
    kernel = compose(approval={})
    calls: list[str] = []
    register_answerer(kernel.ctx, answer("allowed-once", calls, "a"))
    agent = new_agent()
    with pytest.raises(ApprovalOutsideTurnError) as info:
        await service_of(kernel).request(ApprovalRequest(agent, "bash", call_id="c1"))
    assert info.value.code == "APPROVAL_OUTSIDE_TURN"
    assert "turn" in str(info.value)
    assert len(agent.session) == 0
    assert calls == []


async def test_an_ask_between_turns_throws_before_appending() -> None:
    kernel = compose(approval={})
    agent = new_agent()
    open_turn(agent.session)
    close_turn(agent.session)
    with pytest.raises(ApprovalOutsideTurnError):
        await service_of(kernel).request(ApprovalRequest(agent, "bash"))
    assert [e.type for e in agent.session.events] == ["turn/start", "turn/end"]


# -- the waterfall -----------------------------------------------------------------------------
async def test_no_listener_yields_unavailable_with_the_pair_audited() -> None:
    kernel = compose(approval={})
    agent = turn_agent()
    outcome = await service_of(kernel).request(ApprovalRequest(agent, "bash"))
    assert outcome is ApprovalOutcome.UNAVAILABLE
    events = agent.session.events
    assert [e.type for e in events] == ["turn/start", "approval/asked", "approval/decided"]
    request_id = events[1].data["id"]
    assert layout(agent.session, 1) == [
        ("approval/asked", {"id": request_id, "tool_name": "bash"}),
        ("approval/decided", {"id": request_id, "outcome": "unavailable"}),
    ]
    assert uuid.UUID(str(request_id)).version == 4


async def test_present_optional_fields_are_logged_with_what_the_action_would_run() -> None:
    kernel = compose(approval={})
    agent = turn_agent()
    seen: list[ApprovalRequest] = []

    def fn(req: ApprovalRequest, next: Next) -> str:
        seen.append(req)
        return "rejected"

    register_answerer(kernel.ctx, fn)
    request = ApprovalRequest(
        agent,
        "write",
        call_id="call-7",
        reason="escalate",
        action={"path": "/etc/x", "justification": "j", "content": 1},
    )
    assert await service_of(kernel).request(request) is ApprovalOutcome.REJECTED
    # the answerer gets the request with the grants it may make (added by the service)
    [got] = seen
    assert (got.agent, got.tool_name, got.call_id, got.reason, got.action) == (
        request.agent,
        "write",
        "call-7",
        "escalate",
        request.action,
    )
    assert got.choices is not None and [s.rule for s in got.choices.scopes] == [
        "Write(//etc/x)",
        "Write(//etc/**)",
        "Write",
    ]
    # the action's tool, command, path and target mode are logged exact; nothing else of it
    assert audit(agent.session) == [
        (
            "approval/asked",
            {
                "tool_name": "write",
                "call_id": "call-7",
                "reason": "escalate",
                "action": {"tool": "write", "path": "/etc/x"},
            },
        ),
        ("approval/decided", {"outcome": "rejected"}),
    ]


async def test_an_escalation_logs_its_target_mode_and_command_in_full() -> None:
    kernel = compose(approval={})
    agent = turn_agent()
    command = "printf '\\x1b[2K' \x1b[2K\r\u202e; " + "x" * 5000
    request = ApprovalRequest(
        agent,
        "bash",
        action={"command": command, "sandbox_permissions": "read-only"},
        target_mode=SandboxMode.DANGER_FULL_ACCESS,
    )
    assert await service_of(kernel).request(request) is ApprovalOutcome.UNAVAILABLE
    (asked, _decided) = audit(agent.session)
    # the mode comes from the ladder's validated target, never from the arguments' copy
    assert asked[1]["action"] == {
        "tool": "bash",
        "command": command,
        "target_mode": "danger-full-access",
    }
    assert AskedAction.from_data(asked[1]["action"], "bash") == AskedAction(
        "bash", command, None, SandboxMode.DANGER_FULL_ACCESS
    )


def test_a_stored_action_of_the_wrong_shape_is_left_out_never_guessed() -> None:
    assert AskedAction.from_data(None, "bash") == AskedAction("bash")
    assert AskedAction.from_data(
        {"tool": 3, "command": ["ls"], "path": "p", "target_mode": "root"}, "edit"
    ) == AskedAction("edit", None, "p", None)


async def test_the_first_answering_listener_wins() -> None:
    kernel = compose(approval={})
    calls: list[str] = []
    register_answerer(kernel.ctx, answer(ApprovalOutcome.ALLOWED_ONCE, calls, "first"))
    register_answerer(kernel.ctx, answer("rejected", calls, "second"))
    agent = turn_agent()
    assert await service_of(kernel).request(ApprovalRequest(agent, "bash")) == "allowed-once"
    assert calls == ["first"]
    assert audit(agent.session)[-1] == ("approval/decided", {"outcome": "allowed-once"})


async def test_a_non_owner_delegates_through_next_to_the_fail_closed_default() -> None:
    kernel = compose(approval={})
    owner = turn_agent("owner")
    other = turn_agent("other")
    calls: list[str] = []

    async def owns_one_agent(req: ApprovalRequest, next: Next) -> Any:
        calls.append(req.agent.session.id)
        if req.agent is not owner:
            return await next()
        return "allowed-once"

    register_answerer(kernel.ctx, owns_one_agent)
    service = service_of(kernel)
    assert await service.request(ApprovalRequest(other, "bash")) is ApprovalOutcome.UNAVAILABLE
    assert await service.request(ApprovalRequest(owner, "bash")) is ApprovalOutcome.ALLOWED_ONCE
    assert calls == ["other", "owner"]


async def test_global_and_matching_scoped_listeners_are_called_a_foreign_scope_never() -> None:
    kernel = compose(approval={})
    agent = turn_agent("mine")
    foreign = turn_agent("foreign")
    calls: list[str] = []
    register_answerer(kernel.ctx, delegate(calls, "global"))
    register_answerer(kernel.ctx, answer("allowed-once", calls, "foreign"), scope=foreign)
    register_answerer(kernel.ctx, delegate(calls, "scoped"), scope=agent)
    outcome = await service_of(kernel).request(ApprovalRequest(agent, "bash"))
    assert outcome is ApprovalOutcome.UNAVAILABLE
    assert calls == ["global", "scoped"]


async def test_a_scoped_answerer_answers_only_its_agent() -> None:
    kernel = compose(approval={})
    agent = turn_agent("mine")
    other = turn_agent("other")
    register_answerer(kernel.ctx, answer("allowed-once"), scope=agent)
    service = service_of(kernel)
    assert await service.request(ApprovalRequest(agent, "bash")) is ApprovalOutcome.ALLOWED_ONCE
    assert await service.request(ApprovalRequest(other, "bash")) is ApprovalOutcome.UNAVAILABLE


async def test_throwing_answerers_yield_unavailable() -> None:
    def sync_raise(req: ApprovalRequest, next: Next) -> str:
        raise RuntimeError("boom")

    async def async_raise(req: ApprovalRequest, next: Next) -> str:
        await asyncio.sleep(0)
        raise RuntimeError("boom")

    for fn in (sync_raise, async_raise):
        kernel = compose(approval={})
        register_answerer(kernel.ctx, fn)
        agent = turn_agent()
        assert await service_of(kernel).request(ApprovalRequest(agent, "bash")) == "unavailable"
        assert audit(agent.session) == [
            ("approval/asked", {"tool_name": "bash"}),
            ("approval/decided", {"outcome": "unavailable"}),
        ]


@pytest.mark.parametrize(
    "rogue", ["allow", "ALLOWED-ONCE", "allowed_once", None, 1, True, {"outcome": "allowed-once"}]
)
async def test_a_rogue_return_yields_unavailable(rogue: object) -> None:
    kernel = compose(approval={})
    register_answerer(kernel.ctx, answer(rogue))
    agent = turn_agent()
    assert await service_of(kernel).request(ApprovalRequest(agent, "bash")) == "unavailable"
    assert audit(agent.session)[-1] == ("approval/decided", {"outcome": "unavailable"})


@pytest.mark.parametrize("outcome", [o for o in ApprovalOutcome if o not in GRANTING])
async def test_every_vocabulary_answer_is_returned_as_given(outcome: ApprovalOutcome) -> None:
    kernel = compose(approval={})
    register_answerer(kernel.ctx, answer(outcome.value))  # a plain string is fine
    agent = turn_agent()
    result = await service_of(kernel).request(ApprovalRequest(agent, "bash"))
    assert result is outcome
    assert audit(agent.session)[-1] == ("approval/decided", {"outcome": outcome.value})


# -- cancellation and timeouts -----------------------------------------------------------------
async def test_a_pre_aborted_signal_yields_cancelled_without_asking() -> None:
    kernel = compose(approval={})
    calls: list[str] = []
    register_answerer(kernel.ctx, answer("allowed-once", calls, "a"))
    signal = AbortSignal()
    signal.abort("user")
    agent = turn_agent()
    outcome = await service_of(kernel).request(ApprovalRequest(agent, "bash", signal=signal))
    assert outcome is ApprovalOutcome.CANCELLED
    assert calls == []
    assert audit(agent.session) == [
        ("approval/asked", {"tool_name": "bash"}),
        ("approval/decided", {"outcome": "cancelled"}),
    ]


@pytest.mark.parametrize("late", ["answer", "raise"])
async def test_a_mid_question_abort_cancels_and_discards_the_late_answer(late: str) -> None:
    loop = asyncio.get_running_loop()
    unhandled: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: unhandled.append(context))
    kernel = compose(approval={})
    started = asyncio.Event()
    release: asyncio.Future[str] = loop.create_future()
    finished = asyncio.Event()

    async def stubborn(req: ApprovalRequest, next: Next) -> str:
        # Ignores cancellation and answers (or fails) late anyway: the worst-behaved answerer.
        started.set()
        try:
            while True:
                try:
                    value = await asyncio.shield(release)
                    break
                except asyncio.CancelledError:
                    continue
            if late == "raise":
                raise RuntimeError("late failure")
            return value
        finally:
            finished.set()

    register_answerer(kernel.ctx, stubborn)
    agent = turn_agent()
    signal = AbortSignal()
    request = asyncio.create_task(
        service_of(kernel).request(ApprovalRequest(agent, "bash", signal=signal))
    )
    await started.wait()
    signal.abort("user")
    assert await request is ApprovalOutcome.CANCELLED
    release.set_result("allowed-once")
    await finished.wait()
    for _ in range(3):
        await asyncio.sleep(0)
    gc.collect()
    await asyncio.sleep(0)
    assert unhandled == []
    assert audit(agent.session) == [
        ("approval/asked", {"tool_name": "bash"}),
        ("approval/decided", {"outcome": "cancelled"}),
    ]
    loop.set_exception_handler(None)


async def test_a_hanging_answerer_times_out_unavailable() -> None:
    kernel = compose(approval={"timeout_seconds": 0.05})
    cancelled = asyncio.Event()

    async def hang(req: ApprovalRequest, next: Next) -> str:
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()
        return "allowed-once"

    register_answerer(kernel.ctx, hang)
    agent = turn_agent()
    assert await service_of(kernel).request(ApprovalRequest(agent, "bash")) == "unavailable"
    assert cancelled.is_set()
    assert audit(agent.session)[-1] == ("approval/decided", {"outcome": "unavailable"})


async def test_cancelling_the_asking_task_still_closes_the_audit_pair() -> None:
    kernel = compose(approval={})
    started = asyncio.Event()
    answerer_cancelled = asyncio.Event()

    async def slow(req: ApprovalRequest, next: Next) -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            answerer_cancelled.set()
            raise
        return "allowed-once"

    register_answerer(kernel.ctx, slow)
    agent = turn_agent()
    task = asyncio.create_task(service_of(kernel).request(ApprovalRequest(agent, "bash")))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await answerer_cancelled.wait()
    assert audit(agent.session) == [
        ("approval/asked", {"tool_name": "bash"}),
        ("approval/decided", {"outcome": "cancelled"}),
    ]


@pytest.mark.parametrize("bad", [0, -1, float("inf"), float("nan")])
def test_a_bad_timeout_is_rejected_at_load(bad: float) -> None:
    with pytest.raises(PluginConfigError, match="timeout_seconds"):
        Kernel().load(approval_plugin, {"timeout_seconds": bad})
    with pytest.raises(InvalidPolicyConfigError):
        ApprovalService(Kernel().ctx, timeout=bad)


# -- ids and disposal --------------------------------------------------------------------------
async def test_each_request_gets_a_fresh_id() -> None:
    kernel = compose(approval={})
    agent = turn_agent()
    service = service_of(kernel)
    for _ in range(3):
        await service.request(ApprovalRequest(agent, "bash"))
    asked = [e.data["id"] for e in agent.session.events if e.type == "approval/asked"]
    decided = [e.data["id"] for e in agent.session.events if e.type == "approval/decided"]
    assert asked == decided
    assert len(set(asked)) == 3


async def test_a_disposed_listener_drops_out_of_the_chain() -> None:
    kernel = compose(approval={})
    handle = register_answerer(kernel.ctx, answer("allowed-once"))
    agent = turn_agent()
    service = service_of(kernel)
    assert await service.request(ApprovalRequest(agent, "bash")) == "allowed-once"
    handle.dispose()
    assert await service.request(ApprovalRequest(agent, "bash")) == "unavailable"


async def test_an_unloaded_answerer_plugin_fails_asks_closed() -> None:
    kernel = compose(approval={})
    plugin = kernel.ctx.child("answerer")
    register_answerer(plugin, answer("allowed-once"))
    agent = turn_agent()
    plugin.dispose()
    assert await service_of(kernel).request(ApprovalRequest(agent, "bash")) == "unavailable"


# -- policy --------------------------------------------------------------------------------------
def test_policy_fold_and_validation() -> None:
    kernel = compose(approval={})
    service = service_of(kernel)
    session = Session(SessionHeader("s1", 0))
    assert service.override_of(session) is None
    assert service.effective_policy(session) is ApprovalPolicy.ASK
    service.set_approval_policy(session, "never")
    service.set_approval_policy(session, ApprovalPolicy.ASK, source="delegation")
    assert layout(session) == [
        ("approval/policy", {"policy": "never"}),
        ("approval/policy", {"policy": "ask", "source": "delegation"}),
    ]
    assert fold_approval_policy(session.events) is ApprovalPolicy.ASK
    assert fold_approval_policy(session.events[:1]) is ApprovalPolicy.NEVER
    assert fold_approval_policy([]) is None
    with pytest.raises(InvalidPolicyError) as info:
        service.set_approval_policy(session, "sometimes")
    assert info.value.code == "INVALID_POLICY"
    assert str(info.value) == "invalid approval policy 'sometimes' (accepted: ask, never)"
    with pytest.raises(InvalidSourceError):
        service.set_approval_policy(session, "ask", source="user")  # type: ignore[arg-type]
    assert len(session) == 2


def test_a_bad_policy_is_rejected_at_load() -> None:
    kernel = Kernel()
    with pytest.raises(PluginConfigError) as info:
        kernel.load(approval_plugin, {"policy": "always"})
    assert "'ask' or 'never'" in str(info.value)
    assert kernel.ctx.get(APPROVAL_SERVICE) is None
    with pytest.raises(InvalidPolicyError):
        ApprovalService(kernel.ctx, "always")


async def test_a_corrupt_stored_policy_denies() -> None:
    kernel = compose(approval={})
    register_answerer(kernel.ctx, answer("allowed-once"))
    seed = [Event.make("approval/policy", 0, 0, {"policy": "whenever"})]
    agent = ToyAgent(Session(SessionHeader("s1", 0), seed))
    open_turn(agent.session)
    assert await service_of(kernel).request(ApprovalRequest(agent, "bash")) == "unavailable"


async def test_never_rejects_without_consulting_any_answerer() -> None:
    kernel = Kernel()
    calls: list[str] = []
    # Registered before the service exists...
    register_answerer(kernel.ctx, answer("allowed-once", calls, "early"))
    kernel.load(approval_plugin, {"policy": "never"})
    # ...and prepended after it, global and scoped.
    agent = turn_agent()
    register_answerer(kernel.ctx, answer("allowed-once", calls, "prepended"), prepend=True)
    register_answerer(
        kernel.ctx, answer("allowed-once", calls, "scoped"), scope=agent, prepend=True
    )
    outcome = await service_of(kernel).request(ApprovalRequest(agent, "bash", call_id="c1"))
    assert outcome is ApprovalOutcome.REJECTED
    assert calls == []
    assert audit(agent.session) == [
        ("approval/asked", {"tool_name": "bash", "call_id": "c1"}),
        ("approval/decided", {"outcome": "rejected"}),
    ]


async def test_a_session_override_beats_the_config_in_both_directions() -> None:
    calls: list[str] = []
    # config never, session ask: answerers are consulted.
    kernel = compose(approval={"policy": "never"})
    register_answerer(kernel.ctx, answer("allowed-once", calls, "a"))
    agent = turn_agent()
    service_of(kernel).set_approval_policy(agent.session, "ask")
    assert await service_of(kernel).request(ApprovalRequest(agent, "bash")) == "allowed-once"
    assert calls == ["a"]
    # config ask, session never: rejected before any answerer.
    kernel = compose(approval={"policy": "ask"})
    register_answerer(kernel.ctx, answer("allowed-once", calls, "b"))
    agent = turn_agent()
    service_of(kernel).set_approval_policy(agent.session, "never")
    assert await service_of(kernel).request(ApprovalRequest(agent, "bash")) == "rejected"
    assert calls == ["a"]


# -- live switch and context ---------------------------------------------------------------------
def test_a_live_switch_appends_and_queues_a_notice() -> None:
    kernel = compose(approval={})
    service = service_of(kernel)
    agent = new_agent()
    assert service.set_policy(agent, "never") is True
    assert layout(agent.session) == [("approval/policy", {"policy": "never"})]
    assert agent.notices == [
        (
            'The approval policy changed from "ask" to "never" (changed by the user).',
            {"kind": "plugin", "plugin": "approval"},
        )
    ]
    # Unchanged: no event, no notice.
    assert service.set_policy(agent, ApprovalPolicy.NEVER) is False
    assert len(agent.session) == 1
    assert len(agent.notices) == 1
    assert service.set_policy(agent, "ask") is True
    assert agent.notices[-1][0] == (
        'The approval policy changed from "never" to "ask" (changed by the user).'
    )


def test_set_policy_compares_with_the_effective_policy() -> None:
    kernel = compose(approval={"policy": "never"})
    agent = new_agent()
    assert service_of(kernel).set_policy(agent, "never") is False
    assert len(agent.session) == 0


def test_a_switch_on_an_agent_without_an_inbox_still_appends() -> None:
    kernel = compose(approval={})
    agent = SessionOnlyAgent(Session(SessionHeader("s1", 0)))
    assert service_of(kernel).set_policy(agent, "never") is True
    assert layout(agent.session) == [("approval/policy", {"policy": "never"})]
    with pytest.raises(InvalidPolicyError):
        service_of(kernel).set_policy(agent, "maybe")


def test_the_context_sentence_is_complete_and_byte_stable() -> None:
    kernel = compose(sandbox={"mode": "read-only"}, approval={})
    service = service_of(kernel)
    agent = new_agent()
    rendered = kernel.runtime.prompt.render("context", agent)
    assert [name for name, _ in rendered] == ["sandbox:policy", "approval:policy"]
    assert rendered[1] == ("approval:policy", ASK_TEXT)
    assert kernel.runtime.prompt.render("context", agent) == rendered
    service.set_policy(agent, "never")
    assert kernel.runtime.prompt.render("context", agent)[1] == ("approval:policy", NEVER_TEXT)
    assert kernel.runtime.prompt.render("context", agent)[1] == ("approval:policy", NEVER_TEXT)
    parts = kernel.runtime.prompt.parts("context", agent)
    assert [(p.name, p.order) for p in parts] == [("sandbox:policy", 110), ("approval:policy", 115)]
    assert service.context_text(None) == ""
    assert kernel.runtime.prompt.render("context", None) == []


def test_the_context_is_disposed_with_the_service() -> None:
    kernel = Kernel()
    handle = kernel.load(approval_plugin, {"policy": "never"})
    agent = new_agent()
    assert kernel.runtime.prompt.render("context", agent) == [("approval:policy", NEVER_TEXT)]
    handle.dispose()
    assert kernel.ctx.get(APPROVAL_SERVICE) is None
    assert kernel.runtime.prompt.render("context", agent) == []


def test_registered_as_an_entry_point() -> None:
    assert resolve_plugin("approval") is approval_plugin


# -- durability ------------------------------------------------------------------------------
async def test_the_decision_is_durable_when_request_returns() -> None:
    # A slow backend: the write-behind lags well behind appends, so only the flush barrier can
    # make the decision durable by the time request() returns.
    persistence = MemoryPersistence(append_yields=20)
    store = SessionStore(persistence)
    kernel = compose(store=store, approval={})
    register_answerer(kernel.ctx, answer("allowed-once"))
    agent = ToyAgent(store.create("s1"))
    open_turn(agent.session)
    await asyncio.sleep(0)
    assert "turn/start" not in persistence.stored_types("s1")  # the lag is real
    outcome = await service_of(kernel).request(ApprovalRequest(agent, "bash"))
    assert outcome is ApprovalOutcome.ALLOWED_ONCE
    assert persistence.stored_types("s1") == ["turn/start", "approval/asked", "approval/decided"]
    stored = await persistence.inspect("s1")
    assert stored.events == tuple(agent.session.events)


async def test_the_decision_is_on_disk_when_request_returns(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path / 'store'}"
    store = SessionStore(open_persistence(url))
    kernel = compose(store=store, approval={})
    register_answerer(kernel.ctx, answer("allowed-once"))
    agent = ToyAgent(store.create("s1"))
    open_turn(agent.session)
    outcome = await approval_of(kernel).request(ApprovalRequest(agent, "bash", call_id="c1"))
    assert outcome is ApprovalOutcome.ALLOWED_ONCE
    # A second, independent reader of the same files sees the whole pair right away.
    reader = open_persistence(url)
    try:
        stored = await reader.inspect("s1")
    finally:
        await reader.close()
    # (The reader sees the turn as a crash would leave it, so it plans closers after the pair.)
    live = tuple(agent.session.events)
    assert stored.events[: len(live)] == live
    assert [e.type for e in live][-2:] == ["approval/asked", "approval/decided"]
    assert stored.repair.unmatched_approvals == ()
    await store.close()


async def test_a_failed_flush_raises_instead_of_returning_an_outcome() -> None:
    persistence = MemoryPersistence(fail_appends=True)
    store = SessionStore(persistence)
    kernel = compose(store=store, approval={})
    register_answerer(kernel.ctx, answer("allowed-once"))
    agent = ToyAgent(store.create("s1"))
    open_turn(agent.session)
    with pytest.raises(PersistenceError):
        await service_of(kernel).request(ApprovalRequest(agent, "bash"))
    # The live log still closes the pair; it is the durability that failed.
    assert [e.type for e in agent.session.events][-2:] == ["approval/asked", "approval/decided"]


async def test_without_a_store_the_request_completes_in_memory() -> None:
    kernel = compose(approval={})
    assert kernel.ctx.get(SESSIONS_SERVICE) is None
    agent = turn_agent()
    assert await service_of(kernel).request(ApprovalRequest(agent, "bash")) == "unavailable"
