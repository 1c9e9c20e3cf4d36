"""Kernel.load: requirements, config validation, per-plugin contexts, unloading."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from tether.kernel import (
    Context,
    FunctionPlugin,
    Next,
    Notice,
    Plugin,
    PluginConfigError,
    PluginError,
    PluginRequirementError,
    ServiceKey,
)
from tether.kernel._plugin import DuplicatePluginError, Kernel
from tether.policy import APPROVAL_SERVICE
from tether.policy._approval import APPROVAL_REQUEST

SESSION_CREATED = Notice[object]("session/created")
TICK = Notice[object]("tick")
SEEN = ServiceKey[object]("seen")
HALF = ServiceKey[object]("half")
NEVER = ServiceKey[object]("never")


class GuardConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    guarded: list[str] = Field(default_factory=list)
    timeout_s: float = 30.0


def noop(ctx: Context, config: Any) -> None:
    pass


def test_load_applies_with_a_child_context_named_for_the_plugin() -> None:
    kernel = Kernel()
    seen: list[tuple[str | None, object]] = []
    handle = kernel.load(FunctionPlugin("probe", lambda ctx, cfg: seen.append((ctx.owner, cfg))))
    assert seen == [("probe", None)]
    assert handle.name == "probe"
    assert handle.ctx.owner == "probe"
    assert handle.config is None
    assert kernel.plugins() == ["probe"]
    assert kernel.plugin("probe") is handle
    assert kernel.plugin("missing") is None


def test_any_object_with_name_and_apply_is_a_plugin() -> None:
    class ApprovalService:
        name = "approval"
        requires = ()

        def apply(self, ctx: Context, config: Any) -> None:
            ctx.provide(APPROVAL_SERVICE, self)

    plugin = ApprovalService()
    assert isinstance(plugin, Plugin)
    kernel = Kernel()
    kernel.load(plugin)
    assert kernel.ctx.get(APPROVAL_SERVICE) is plugin


@pytest.mark.parametrize("bogus", [object(), "name", FunctionPlugin("", noop)])
def test_non_plugins_are_refused(bogus: object) -> None:
    with pytest.raises(PluginError) as info:
        Kernel().load(bogus)
    assert info.value.code == "PLUGIN_ERROR"
    assert "is not a plugin (needs a 'name' and 'apply(ctx, config)')" in str(info.value)


def test_disposing_a_plugin_removes_everything_it_registered() -> None:
    kernel = Kernel()
    effects: list[str] = []
    heard: list[object] = []

    def apply(ctx: Context, config: Any) -> None:
        ctx.effect(lambda: effects.append("first"))
        ctx.provide(APPROVAL_SERVICE, "svc")
        ctx.on(SESSION_CREATED, heard.append)
        ctx.on(APPROVAL_REQUEST, lambda p, next: "allowed-once")
        ctx.section("approval:rules", 50, "Ask first.")
        ctx.context("approval:policy", 115, "Policy: ask.")
        ctx.effect(lambda: effects.append("second"))

    handle = kernel.load(FunctionPlugin("approvals", apply))
    kernel.ctx.emit(SESSION_CREATED, 1)
    assert kernel.ctx.get(APPROVAL_SERVICE) == "svc"
    assert kernel.runtime.prompt.render("section", None) == [("approval:rules", "Ask first.")]
    assert kernel.runtime.prompt.render("context", None) == [("approval:policy", "Policy: ask.")]

    handle.dispose()
    assert effects == ["second", "first"]
    kernel.ctx.emit(SESSION_CREATED, 2)
    assert heard == [1]
    assert kernel.ctx.get(APPROVAL_SERVICE) is None
    assert kernel.runtime.prompt.render("section", None) == []
    assert kernel.runtime.prompt.render("context", None) == []
    assert kernel.plugins() == []
    handle.dispose()
    assert effects == ["second", "first"]


async def test_unloaded_answerer_fails_asks_closed() -> None:
    kernel = Kernel()

    async def answer(payload: object, next: Next) -> str:
        return "allowed-once"

    handle = kernel.load(
        FunctionPlugin("answerer", lambda ctx, cfg: ctx.on(APPROVAL_REQUEST, answer))
    )
    assert await kernel.ctx.waterfall(APPROVAL_REQUEST, {}, "unavailable") == "allowed-once"
    handle.dispose()
    assert await kernel.ctx.waterfall(APPROVAL_REQUEST, {}, "unavailable") == "unavailable"


def test_disposing_one_plugin_leaves_the_others() -> None:
    kernel = Kernel()
    heard: list[str] = []
    a = kernel.load(FunctionPlugin("a", lambda ctx, cfg: ctx.on(TICK, lambda p: heard.append("a"))))
    kernel.load(FunctionPlugin("b", lambda ctx, cfg: ctx.on(TICK, lambda p: heard.append("b"))))
    a.dispose()
    kernel.ctx.emit(TICK, None)
    assert heard == ["b"]
    assert kernel.plugins() == ["b"]


def test_kernel_dispose_unloads_in_reverse_order() -> None:
    kernel = Kernel()
    order: list[str] = []
    for name in ("first", "second", "third"):
        kernel.load(
            FunctionPlugin(name, lambda ctx, cfg, n=name: ctx.effect(lambda: order.append(n)))  # type: ignore[misc]
        )
    kernel.dispose()
    assert order == ["third", "second", "first"]
    assert kernel.plugins() == []


# -- requirements -----------------------------------------------------------------------------


def test_missing_requirement_names_plugin_and_service() -> None:
    kernel = Kernel()
    applied: list[str] = []
    plugin = FunctionPlugin(
        "root_approvals", lambda ctx, cfg: applied.append("x"), requires=(APPROVAL_SERVICE,)
    )
    with pytest.raises(PluginRequirementError) as info:
        kernel.load(plugin)
    assert info.value.code == "PLUGIN_REQUIREMENT"
    assert str(info.value) == (
        "plugin 'root_approvals' requires service 'approval', which no loaded plugin provides"
    )
    assert applied == []
    assert kernel.plugins() == []


def test_requirement_met_by_an_earlier_plugin() -> None:
    kernel = Kernel()
    provider = kernel.load(
        FunctionPlugin("approval", lambda ctx, cfg: ctx.provide(APPROVAL_SERVICE, "svc"))
    )
    consumer = FunctionPlugin(
        "root_approvals",
        lambda ctx, cfg: ctx.provide(SEEN, ctx.get(APPROVAL_SERVICE)),
        requires=(APPROVAL_SERVICE,),
    )
    kernel.load(consumer)
    assert kernel.ctx.get(SEEN) == "svc"
    # Once the provider is gone, a fresh load of a consumer fails again.
    provider.dispose()
    with pytest.raises(PluginRequirementError):
        kernel.load(FunctionPlugin("late", noop, requires=(APPROVAL_SERVICE,)))


def test_requirements_name_service_keys() -> None:
    key = ServiceKey[str]("greeting")
    kernel = Kernel()
    consumer = FunctionPlugin("greeter", noop, requires=(key,))
    with pytest.raises(PluginRequirementError) as info:
        kernel.load(consumer)
    assert str(info.value) == (
        "plugin 'greeter' requires service 'greeting', which no loaded plugin provides"
    )
    kernel.ctx.provide(key, "hello")
    assert kernel.load(consumer).name == "greeter"


def test_a_requirement_that_is_not_a_key_is_refused_naming_the_plugin() -> None:
    # An untyped plugin (loaded from an entry point) may still list a bare name.
    kernel = Kernel()
    kernel.ctx.provide(APPROVAL_SERVICE, "svc")
    untyped = FunctionPlugin("legacy", noop, requires=("approval",))  # type: ignore[arg-type]
    with pytest.raises(PluginError) as info:
        kernel.load(untyped)
    assert info.value.code == "PLUGIN_ERROR"
    assert str(info.value) == "plugin 'legacy': requires lists service keys, not 'approval'"
    assert kernel.plugins() == []


# -- config -----------------------------------------------------------------------------------


def test_config_is_validated_into_the_model() -> None:
    kernel = Kernel()
    received: list[object] = []
    plugin = FunctionPlugin(
        "guard", lambda ctx, cfg: received.append(cfg), config_model=GuardConfig
    )
    handle = kernel.load(plugin, {"guarded": ["bash", "write"]})
    assert received == [GuardConfig(guarded=["bash", "write"], timeout_s=30.0)]
    assert handle.config == GuardConfig(guarded=["bash", "write"])


def test_model_defaults_apply_without_config() -> None:
    received: list[object] = []
    Kernel().load(
        FunctionPlugin("guard", lambda ctx, cfg: received.append(cfg), config_model=GuardConfig)
    )
    assert received == [GuardConfig()]


def test_a_model_instance_is_passed_through() -> None:
    received: list[object] = []
    config = GuardConfig(guarded=["x"])
    Kernel().load(
        FunctionPlugin("guard", lambda ctx, cfg: received.append(cfg), config_model=GuardConfig),
        config,
    )
    assert received[0] is config


def test_bad_config_names_plugin_and_field() -> None:
    kernel = Kernel()
    applied: list[str] = []
    plugin = FunctionPlugin("guard", lambda ctx, cfg: applied.append("x"), config_model=GuardConfig)
    with pytest.raises(PluginConfigError) as info:
        kernel.load(plugin, {"guarded": "bash", "timeout_s": "soon"})
    assert info.value.code == "PLUGIN_CONFIG"
    message = str(info.value)
    assert message.startswith("plugin 'guard': invalid config: ")
    assert "guarded: Input should be a valid list" in message
    assert "timeout_s: Input should be a valid number" in message
    assert applied == []
    assert kernel.plugins() == []


def test_unknown_config_key_names_the_key() -> None:
    with pytest.raises(PluginConfigError) as info:
        Kernel().load(FunctionPlugin("guard", noop, config_model=GuardConfig), {"gaurded": []})
    assert (
        str(info.value) == "plugin 'guard': invalid config: gaurded: Extra inputs are not permitted"
    )


def test_nested_config_error_path() -> None:
    with pytest.raises(PluginConfigError) as info:
        Kernel().load(
            FunctionPlugin("guard", noop, config_model=GuardConfig), {"guarded": ["ok", 3]}
        )
    assert (
        str(info.value)
        == "plugin 'guard': invalid config: guarded.1: Input should be a valid string"
    )


def test_config_for_a_plugin_without_a_model_is_refused() -> None:
    with pytest.raises(PluginConfigError) as info:
        Kernel().load(FunctionPlugin("plain", noop), {"x": 1})
    assert info.value.code == "PLUGIN_CONFIG"
    assert str(info.value) == "plugin 'plain' takes no configuration, got {'x': 1}"


def test_empty_config_for_a_plugin_without_a_model_is_fine() -> None:
    kernel = Kernel()
    assert kernel.load(FunctionPlugin("plain", noop), {}).config is None


# -- duplicates and failures ------------------------------------------------------------------


def test_duplicate_plugin_name_is_refused() -> None:
    kernel = Kernel()
    calls: list[str] = []
    kernel.load(FunctionPlugin("dup", lambda ctx, cfg: calls.append("first")))
    with pytest.raises(DuplicatePluginError) as info:
        kernel.load(FunctionPlugin("dup", lambda ctx, cfg: calls.append("second")))
    assert info.value.code == "DUPLICATE_PLUGIN"
    assert str(info.value) == "plugin 'dup' is already loaded"
    assert calls == ["first"]


def test_a_name_can_be_loaded_again_after_unloading() -> None:
    kernel = Kernel()
    first = kernel.load(FunctionPlugin("p", noop))
    first.dispose()
    second = kernel.load(FunctionPlugin("p", noop))
    first.dispose()  # a stale handle must not forget the newer plugin
    assert kernel.plugin("p") is second
    assert kernel.plugins() == ["p"]


def test_a_plugin_whose_apply_raises_leaves_nothing_registered() -> None:
    kernel = Kernel()
    effects: list[str] = []

    def apply(ctx: Context, config: Any) -> None:
        ctx.provide(HALF, "done")
        ctx.on(TICK, lambda p: effects.append("listener"))
        ctx.section("s", 1, "text")
        ctx.effect(lambda: effects.append("cleanup"))
        raise RuntimeError("apply failed halfway")

    with pytest.raises(RuntimeError, match="apply failed halfway"):
        kernel.load(FunctionPlugin("broken", apply))
    assert effects == ["cleanup"]
    assert kernel.ctx.get(HALF) is None
    kernel.ctx.emit(TICK, None)
    assert effects == ["cleanup"]
    assert kernel.runtime.prompt.render("section", None) == []
    assert kernel.plugins() == []
    # The name is free and the kernel still works.
    kernel.load(FunctionPlugin("broken", lambda ctx, cfg: ctx.provide(HALF, "ok")))
    assert kernel.ctx.get(HALF) == "ok"


def test_async_apply_is_refused() -> None:
    kernel = Kernel()

    class AsyncPlugin:
        name = "async_plugin"

        async def apply(self, ctx: Context, config: Any) -> None:
            ctx.provide(NEVER, 1)

    with pytest.raises(PluginError) as info:
        kernel.load(AsyncPlugin())
    assert str(info.value) == "plugin 'async_plugin': apply(ctx, config) must be synchronous"
    assert kernel.plugins() == []
    assert kernel.ctx.get(NEVER) is None


def test_async_apply_function_is_refused() -> None:
    kernel = Kernel()

    async def apply(ctx: Context, config: Any) -> None:
        ctx.provide(NEVER, 1)

    with pytest.raises(PluginError) as info:
        kernel.load(FunctionPlugin("async_fn", apply))
    assert str(info.value) == "plugin 'async_fn': apply(ctx, config) must be synchronous"
    assert kernel.plugins() == []
    assert kernel.ctx.get(NEVER) is None
