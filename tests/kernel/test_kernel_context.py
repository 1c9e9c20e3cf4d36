"""Runtime/Context: services, emit, waterfalls, scopes and disposal."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from kernel_support import Agent

from tether.kernel import (
    Context,
    Disposable,
    Gather,
    KeyConflictError,
    Next,
    NotAKeyError,
    Notice,
    Runtime,
    ServiceConflictError,
    ServiceKey,
    ServiceMissingError,
    Waterfall,
)
from tether.policy import APPROVAL_SERVICE, SANDBOX_POLICY_SERVICE
from tether.policy._approval import APPROVAL_REQUEST
from tether.tools._seams import TOOL_GUARD

SVC = ServiceKey[object]("svc")
OTHER = Notice[object]("other")
NOBODY = Notice[object]("nobody")
ASK = Notice[object]("ask")
W = Waterfall[object, object]("w")
NOTHING = Gather[object, object]("nothing")


# -- services ---------------------------------------------------------------------------------


def test_get_of_an_absent_service_is_none(ctx: Context) -> None:
    assert ctx.get(APPROVAL_SERVICE) is None


def test_provided_service_is_live_for_every_context(ctx: Context) -> None:
    service = object()
    ctx.provide(APPROVAL_SERVICE, service)
    assert ctx.get(APPROVAL_SERVICE) is service
    assert ctx.child("other").get(APPROVAL_SERVICE) is service


def test_service_is_gone_after_dispose(ctx: Context) -> None:
    plugin = ctx.child("plugin")
    handle = plugin.provide(APPROVAL_SERVICE, "svc")
    assert ctx.get(APPROVAL_SERVICE) == "svc"
    handle.dispose()
    assert ctx.get(APPROVAL_SERVICE) is None
    plugin.provide(APPROVAL_SERVICE, "again")
    plugin.dispose()
    assert ctx.get(APPROVAL_SERVICE) is None


def test_duplicate_provide_is_a_conflict(ctx: Context) -> None:
    ctx.provide(SANDBOX_POLICY_SERVICE, "first")
    with pytest.raises(ServiceConflictError) as info:
        ctx.child("b").provide(SANDBOX_POLICY_SERVICE, "second")
    assert info.value.code == "SERVICE_CONFLICT"
    assert str(info.value) == "service 'sandbox_policy' is already provided"
    assert ctx.get(SANDBOX_POLICY_SERVICE) == "first"


def test_a_stale_disposer_does_not_remove_a_newer_provider(ctx: Context) -> None:
    old = ctx.provide(SVC, "old")
    old.dispose()
    ctx.provide(SVC, "new")
    old.dispose()
    assert ctx.get(SVC) == "new"


def test_disposable_is_idempotent_and_callable() -> None:
    calls: list[str] = []
    handle = Disposable(lambda: calls.append("x"))
    assert not handle.disposed
    handle()
    handle.dispose()
    assert handle.disposed
    assert calls == ["x"]


# -- emit -------------------------------------------------------------------------------------


def test_emit_calls_listeners_in_order_with_the_payload(ctx: Context) -> None:
    seen: list[tuple[str, object]] = []
    ctx.on(TICK, lambda p: seen.append(("a", p)))
    ctx.on(TICK, lambda p: seen.append(("b", p)))
    ctx.on(TICK, lambda p: seen.append(("first", p)), prepend=True)
    ctx.on(OTHER, lambda p: seen.append(("other", p)))
    ctx.emit(TICK, 5)
    assert seen == [("first", 5), ("a", 5), ("b", 5)]


def test_emit_with_no_listeners_is_fine(ctx: Context) -> None:
    ctx.emit(NOBODY, None)


def test_emit_contains_a_failing_listener(ctx: Context, caplog: pytest.LogCaptureFixture) -> None:
    seen: list[object] = []

    def broken(payload: object) -> None:
        raise RuntimeError("listener broke")

    ctx.on(TICK, broken)
    ctx.on(TICK, seen.append)
    with caplog.at_level(logging.ERROR, logger="tether.kernel._context"):
        ctx.emit(TICK, 1)
    assert seen == [1]
    assert "listener for 'tick' failed" in caplog.text
    assert "listener broke" in caplog.text


async def test_emit_runs_async_listeners_in_the_background_and_contains_failures(
    ctx: Context, caplog: pytest.LogCaptureFixture
) -> None:
    done = asyncio.Event()
    seen: list[object] = []

    async def slow(payload: object) -> None:
        await asyncio.sleep(0)
        seen.append(payload)
        done.set()

    async def broken(payload: object) -> None:
        raise RuntimeError("async listener broke")

    ctx.on(TICK, broken)
    ctx.on(TICK, slow)
    with caplog.at_level(logging.ERROR, logger="tether.kernel._context"):
        ctx.emit(TICK, "p")
        assert seen == []  # emit does not wait
        await asyncio.wait_for(done.wait(), 5)
        await asyncio.sleep(0)
    assert seen == ["p"]
    assert "async listener for 'tick' failed: async listener broke" in caplog.text


def test_emit_of_an_async_listener_without_a_loop_is_reported(
    ctx: Context, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[object] = []

    async def listener(payload: object) -> None:
        ran.append(payload)

    ctx.on(TICK, listener)
    with caplog.at_level(logging.ERROR, logger="tether.kernel._context"):
        ctx.emit(TICK, 1)
    assert ran == []
    assert "async listener for 'tick' needs a running event loop; not run" in caplog.text


def test_listener_disposal(ctx: Context) -> None:
    seen: list[object] = []
    handle = ctx.on(TICK, seen.append)
    ctx.emit(TICK, 1)
    handle.dispose()
    handle.dispose()
    ctx.emit(TICK, 2)
    assert seen == [1]


# -- scopes -----------------------------------------------------------------------------------


def test_scoped_listeners_only_hear_their_own_agent(ctx: Context) -> None:
    parent, child = Agent("parent"), Agent("child")
    seen: list[tuple[str, object]] = []
    ctx.on(ASK, lambda p: seen.append(("global", p)))
    ctx.on(ASK, lambda p: seen.append(("parent", p)), scope=parent)
    ctx.on(ASK, lambda p: seen.append(("child", p)), scope=child)
    ctx.emit(ASK, 1, scope=parent)
    ctx.emit(ASK, 2, scope=child)
    ctx.emit(ASK, 3)
    assert seen == [
        ("global", 1),
        ("parent", 1),
        ("global", 2),
        ("child", 2),
        ("global", 3),
    ]


def test_scope_is_by_identity_not_equality(ctx: Context) -> None:
    class Same:
        def __eq__(self, other: object) -> bool:
            return True

        def __hash__(self) -> int:
            return 0

    seen: list[object] = []
    ctx.on(ASK, seen.append, scope=Same())
    ctx.emit(ASK, "x", scope=Same())  # equal, but another agent
    assert seen == []


async def test_waterfall_scopes(ctx: Context) -> None:
    parent, child = Agent("parent"), Agent("child")

    async def answer(tag: str) -> Any:
        async def listener(payload: object, next: Next) -> str:
            return tag

        return listener

    ctx.on(APPROVAL_REQUEST, await answer("child"), scope=child)
    assert await ctx.waterfall(APPROVAL_REQUEST, {}, "unavailable", scope=parent) == "unavailable"
    assert await ctx.waterfall(APPROVAL_REQUEST, {}, "unavailable") == "unavailable"
    assert await ctx.waterfall(APPROVAL_REQUEST, {}, "unavailable", scope=child) == "child"
    ctx.on(APPROVAL_REQUEST, await answer("global"), prepend=True)
    assert await ctx.waterfall(APPROVAL_REQUEST, {}, "unavailable", scope=parent) == "global"


# -- waterfall --------------------------------------------------------------------------------


async def test_waterfall_without_listeners_returns_the_fallback_value(ctx: Context) -> None:
    assert await ctx.waterfall(W, {"x": 1}, "unavailable") == "unavailable"
    assert await ctx.waterfall(W, {}, 0) == 0


async def test_waterfall_fallback_callables(ctx: Context) -> None:
    calls: list[str] = []

    def sync_fallback() -> str:
        calls.append("sync")
        return "from-sync"

    async def async_fallback() -> str:
        calls.append("async")
        return "from-async"

    assert await ctx.waterfall(W, {}, sync_fallback) == "from-sync"
    assert await ctx.waterfall(W, {}, async_fallback) == "from-async"
    assert calls == ["sync", "async"]


async def test_waterfall_listeners_get_payload_and_next_in_order(ctx: Context) -> None:
    order: list[str] = []
    payload = {"tool": "bash"}

    async def first(p: object, next: Next) -> Any:
        assert p is payload
        order.append("first")
        result = await next()
        order.append("first-after")
        return f"first({result})"

    def second(p: object, next: Next) -> Any:  # a sync listener returning next()'s awaitable
        assert p is payload
        order.append("second")
        return next()

    async def third(p: object, next: Next) -> Any:
        order.append("third")
        return f"third({await next()})"

    ctx.on(W, first)
    ctx.on(W, second)
    ctx.on(W, third)
    assert await ctx.waterfall(W, payload, lambda: "fallback") == "first(third(fallback))"
    assert order == ["first", "second", "third", "first-after"]


async def test_returning_without_next_short_circuits(ctx: Context) -> None:
    later: list[str] = []
    fallback_calls: list[str] = []

    async def gate(p: object, next: Next) -> str:
        return "rejected"

    async def answerer(p: object, next: Next) -> str:
        later.append("answerer")
        return "allowed-once"

    ctx.on(W, answerer)
    ctx.on(W, gate, prepend=True)

    def fallback() -> str:
        fallback_calls.append("fallback")
        return "unavailable"

    assert await ctx.waterfall(W, {}, fallback) == "rejected"
    assert later == []
    assert fallback_calls == []


async def test_sync_listener_may_answer_directly(ctx: Context) -> None:
    ctx.on(W, lambda p, next: "sync-answer")
    assert await ctx.waterfall(W, {}, "fallback") == "sync-answer"


async def test_prepend_ordering(ctx: Context) -> None:
    order: list[str] = []

    def tagged(tag: str) -> Any:
        async def listener(p: object, next: Next) -> Any:
            order.append(tag)
            return await next()

        return listener

    ctx.on(W, tagged("a"))
    ctx.on(W, tagged("p1"), prepend=True)
    ctx.on(W, tagged("b"))
    ctx.on(W, tagged("p2"), prepend=True)
    await ctx.waterfall(W, None, None)
    assert order == ["p2", "p1", "a", "b"]


async def test_waterfall_exceptions_propagate(ctx: Context) -> None:
    class AnswererBroke(Exception):
        pass

    async def broken(p: object, next: Next) -> str:
        raise AnswererBroke("boom")

    async def outer(p: object, next: Next) -> str:
        try:
            return str(await next())
        finally:
            seen.append("outer-finally")

    seen: list[str] = []
    ctx.on(W, outer)
    ctx.on(W, broken)
    with pytest.raises(AnswererBroke):
        await ctx.waterfall(W, {}, "unavailable")
    assert seen == ["outer-finally"]


async def test_fallback_exceptions_propagate(ctx: Context) -> None:
    def fallback() -> str:
        raise LookupError("no fallback")

    with pytest.raises(LookupError):
        await ctx.waterfall(W, {}, fallback)


async def test_listener_may_rewrite_the_result_of_next(ctx: Context) -> None:
    async def downgrade(p: object, next: Next) -> str:
        result = await next()
        return "rejected" if result == "allowed-once" else str(result)

    ctx.on(W, downgrade)
    ctx.on(W, lambda p, next: "allowed-once")
    assert await ctx.waterfall(W, {}, "unavailable") == "rejected"


async def test_disposed_listener_is_gone_from_later_waterfalls(ctx: Context) -> None:
    handle = ctx.on(W, lambda p, next: "answered")
    assert await ctx.waterfall(W, {}, "unavailable") == "answered"
    handle.dispose()
    assert await ctx.waterfall(W, {}, "unavailable") == "unavailable"


async def test_listener_disposed_mid_waterfall_is_skipped(ctx: Context) -> None:
    # An answerer unloaded while an earlier listener awaits must not answer: fail closed.
    later: list[str] = []

    async def first(p: object, next: Next) -> Any:
        answerer.dispose()
        await asyncio.sleep(0)
        return await next()

    async def second(p: object, next: Next) -> str:
        later.append("answered")
        return "allowed-once"

    ctx.on(W, first)
    answerer = ctx.on(W, second)
    assert await ctx.waterfall(W, {}, "unavailable") == "unavailable"
    assert later == []


# -- contexts and disposal --------------------------------------------------------------------


def test_context_dispose_undoes_everything_newest_first(ctx: Context) -> None:
    runtime = ctx.runtime
    plugin = ctx.child("plugin")
    order: list[str] = []
    plugin.effect(lambda: order.append("effect-1"))
    plugin.provide(SVC, "x")
    plugin.on(TICK, lambda p: order.append("listener"))
    plugin.section("rules", 10, "Be careful.")
    plugin.context("sandbox:policy", 110, "Read-only.")
    plugin.effect(lambda: order.append("effect-2"))
    assert plugin.owner == "plugin"

    plugin.dispose()
    assert order == ["effect-2", "effect-1"]
    ctx.emit(TICK, None)
    assert order == ["effect-2", "effect-1"]
    assert ctx.get(SVC) is None
    assert runtime.prompt.render("section", None) == []
    assert runtime.prompt.render("context", None) == []
    plugin.dispose()  # twice is harmless
    assert order == ["effect-2", "effect-1"]


def test_effect_handle_runs_cleanup_early_and_once(ctx: Context) -> None:
    plugin = ctx.child("p")
    calls: list[str] = []
    handle = plugin.effect(lambda: calls.append("cleanup"))
    handle.dispose()
    plugin.dispose()
    assert calls == ["cleanup"]


def test_a_failing_cleanup_does_not_stop_the_others(
    ctx: Context, caplog: pytest.LogCaptureFixture
) -> None:
    plugin = ctx.child("p")
    calls: list[str] = []
    plugin.effect(lambda: calls.append("first"))

    def broken() -> None:
        raise RuntimeError("cleanup broke")

    plugin.effect(broken)
    plugin.effect(lambda: calls.append("third"))
    with caplog.at_level(logging.ERROR, logger="tether.kernel._context"):
        plugin.dispose()
    assert calls == ["third", "first"]
    assert "disposing a registration of 'p' failed" in caplog.text


def test_disposing_a_parent_disposes_its_children(ctx: Context) -> None:
    outer = ctx.child("outer")
    inner = outer.child("inner")
    calls: list[str] = []
    outer.effect(lambda: calls.append("outer"))
    inner.effect(lambda: calls.append("inner"))
    inner.provide(SVC, 1)
    outer.dispose()
    # Newest first: the child context was registered on ``outer`` before its effect.
    assert calls == ["outer", "inner"]
    assert ctx.get(SVC) is None


def test_disposing_a_child_leaves_siblings(ctx: Context) -> None:
    a, b = ctx.child("a"), ctx.child("b")
    seen: list[str] = []
    a.on(TICK, lambda p: seen.append("a"))
    b.on(TICK, lambda p: seen.append("b"))
    a.dispose()
    ctx.emit(TICK, None)
    assert seen == ["b"]


# -- collect ----------------------------------------------------------------------------------


def test_collect_returns_every_matching_result_in_order(ctx: Context) -> None:
    agent, other = Agent("agent"), Agent("other")
    ctx.on(TOOL_GUARD, lambda p: f"global:{p}")
    ctx.on(TOOL_GUARD, lambda p: f"scoped:{p}", scope=agent)
    ctx.on(TOOL_GUARD, lambda p: f"other:{p}", scope=other)
    ctx.on(TOOL_GUARD, lambda p: None, prepend=True)
    assert ctx.collect(TOOL_GUARD, "bash", scope=agent) == [None, "global:bash", "scoped:bash"]
    assert ctx.collect(TOOL_GUARD, "bash") == [None, "global:bash"]
    assert ctx.collect(NOTHING, 1) == []


def test_collect_propagates_exceptions(ctx: Context) -> None:
    def broken(payload: object) -> None:
        raise PermissionError("guard broke")

    ctx.on(TOOL_GUARD, broken)
    with pytest.raises(PermissionError):
        ctx.collect(TOOL_GUARD, {})


# -- typed keys ---------------------------------------------------------------------------------
class Counter:
    def __init__(self) -> None:
        self.count = 0


COUNTER = ServiceKey[Counter]("counter")
TICK = Notice[int]("tick")
DECIDE = Waterfall[str, str]("decide")
VETO = Gather[str, str | None]("veto")


def test_a_service_key_provides_gets_and_requires_the_service(ctx: Context) -> None:
    with pytest.raises(ServiceMissingError) as missing:
        ctx.require(COUNTER)
    assert (missing.value.code, str(missing.value)) == (
        "SERVICE_MISSING",
        "service 'counter' is not composed",
    )
    counter = Counter()
    ctx.provide(COUNTER, counter)
    assert ctx.require(COUNTER) is counter
    assert ctx.child("plugin").get(COUNTER) is counter
    # Until every call site names a key, a key and its name reach the same service.
    assert ctx.get(COUNTER) is counter


async def test_notice_waterfall_and_gather_keys_reach_their_listeners(ctx: Context) -> None:
    heard: list[int] = []
    ctx.on(TICK, heard.append)
    ctx.emit(TICK, 3)
    assert heard == [3]

    async def shout(word: str, next_: Next[str]) -> str:
        return (await next_()).upper()

    ctx.on(DECIDE, shout)
    assert await ctx.waterfall(DECIDE, "hi", lambda: "rest") == "REST"
    ctx.on(VETO, lambda word: None)
    ctx.on(VETO, lambda word: f"no {word}")
    assert ctx.collect(VETO, "x") == [None, "no x"]


def test_two_keys_with_one_name_are_refused(ctx: Context) -> None:
    ctx.provide(COUNTER, Counter())
    impostor = ServiceKey[Counter]("counter")
    with pytest.raises(KeyConflictError) as info:
        ctx.get(impostor)
    assert info.value.code == "KEY_CONFLICT"
    assert str(info.value) == (
        "two different keys are named 'counter' (ServiceKey('counter') and ServiceKey('counter'))"
    )
    with pytest.raises(KeyConflictError):
        ctx.on(Notice[int]("counter"), print)
    # Each runtime has its own table: another runtime may use the impostor.
    assert Runtime().root.get(impostor) is None


async def test_a_bare_name_is_refused_by_every_operation(ctx: Context) -> None:
    # Only untyped code can pass a string; the kernel names what to pass instead.
    ctx.provide(COUNTER, Counter())
    calls = [
        lambda: ctx.get("counter"),
        lambda: ctx.provide("counter", Counter()),
        lambda: ctx.on("tick", print),
        lambda: ctx.emit("tick", 1),
        lambda: ctx.collect("tools/guard", None),
    ]
    for untyped in calls:
        with pytest.raises(NotAKeyError) as info:
            untyped()
        assert info.value.code == "NOT_A_KEY"
    with pytest.raises(NotAKeyError) as waited:
        await ctx.waterfall("w", None, "fallback")
    assert str(waited.value) == (
        "kernel seams are named by typed keys (tether.kernel._keys), not 'w'"
    )
    assert ctx.get(COUNTER) is not None  # nothing was registered or removed
