"""Plugins: a name, hard requirements (``requires``: the service keys that must be provided
before it loads), a validated config, and ``apply(ctx, config)``.

A plugin is any object with those attributes: a module, a class instance, or a
:class:`FunctionPlugin`. Loading checks requirements and validates config up front, so a
misconfigured deployment fails at start with the plugin's name in the message, not on the
first tool call. Each plugin gets its own child context; unloading disposes everything it
registered.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ValidationError

from tether.errors import TetherError
from tether.kernel._context import Context, Runtime
from tether.kernel._keys import AnyServiceKey


class PluginError(TetherError):
    code = "PLUGIN_ERROR"


class PluginRequirementError(PluginError):
    code = "PLUGIN_REQUIREMENT"


class PluginConfigError(PluginError):
    code = "PLUGIN_CONFIG"


class DuplicatePluginError(PluginError):
    code = "DUPLICATE_PLUGIN"


C = TypeVar("C")
C_contra = TypeVar("C_contra", contravariant=True)


@runtime_checkable
class Plugin(Protocol[C_contra]):
    """What :meth:`Kernel.load` loads; ``C_contra`` is the config it is applied with (its
    ``config_model``, validated, or ``None`` without one)."""

    name: str

    def apply(self, ctx: Context, config: C_contra) -> None: ...


@dataclass(frozen=True)
class FunctionPlugin(Generic[C]):
    """A plugin built from a function, for small compositions and tests."""

    name: str
    apply_fn: Callable[[Context, C], object]
    requires: tuple[AnyServiceKey, ...] = ()
    config_model: type[BaseModel] | None = None

    def apply(self, ctx: Context, config: C) -> None:
        _refuse_awaitable(self.name, self.apply_fn(ctx, config))


@dataclass
class PluginHandle:
    name: str
    ctx: Context
    config: BaseModel | None
    _on_dispose: Callable[[], None] = field(repr=False)

    def dispose(self) -> None:
        """Unload: every listener, service and effect the plugin registered is removed."""
        self.ctx.dispose()
        self._on_dispose()


def _refuse_awaitable(name: str, result: object) -> None:
    # An ``async def apply`` would register nothing until awaited, and nobody awaits it:
    # refuse it loudly rather than load a plugin that silently does nothing.
    if inspect.isawaitable(result):
        close = getattr(result, "close", None)
        if callable(close):
            close()
        raise PluginError(f"plugin {name!r}: apply(ctx, config) must be synchronous")


def validate_config(
    plugin: object, name: str, raw: Mapping[str, object] | BaseModel | None
) -> BaseModel | None:
    model: type[BaseModel] | None = getattr(plugin, "config_model", None)
    if model is None:
        if raw:
            raise PluginConfigError(f"plugin {name!r} takes no configuration, got {dict(raw)}")
        return None
    if isinstance(raw, model):
        return raw
    try:
        return model.model_validate(dict(raw or {}))
    except ValidationError as err:
        details = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in err.errors()
        )
        raise PluginConfigError(f"plugin {name!r}: invalid config: {details}") from err


class Kernel:
    """A :class:`Runtime` plus the table of loaded plugins."""

    def __init__(self) -> None:
        self.runtime = Runtime()
        self.ctx = self.runtime.root
        self._plugins: dict[str, PluginHandle] = {}

    def load(
        self, plugin: object, config: Mapping[str, object] | BaseModel | None = None
    ) -> PluginHandle:
        name = getattr(plugin, "name", None)
        apply = getattr(plugin, "apply", None)
        if not isinstance(name, str) or not name or not callable(apply):
            raise PluginError(
                f"{plugin!r} is not a plugin (needs a 'name' and 'apply(ctx, config)')"
            )
        if name in self._plugins:
            raise DuplicatePluginError(f"plugin {name!r} is already loaded")
        for service in getattr(plugin, "requires", ()):
            # A plugin from an entry point is untyped: a bare name would otherwise fail deep in
            # the kernel instead of naming the plugin.
            if not isinstance(service, AnyServiceKey):
                raise PluginError(f"plugin {name!r}: requires lists service keys, not {service!r}")
            if self.ctx.get(service) is None:
                raise PluginRequirementError(
                    f"plugin {name!r} requires service {service.name!r}, "
                    "which no loaded plugin provides"
                )
        validated = validate_config(plugin, name, config)
        ctx = self.ctx.child(name)
        try:
            _refuse_awaitable(name, apply(ctx, validated))
        except BaseException:
            ctx.dispose()
            raise

        def forget() -> None:
            # A stale handle (disposed twice, after the name was loaded again) must not
            # forget the newer plugin.
            if self._plugins.get(name) is handle:
                del self._plugins[name]

        handle = PluginHandle(name, ctx, validated, forget)
        self._plugins[name] = handle
        return handle

    def plugin(self, name: str) -> PluginHandle | None:
        return self._plugins.get(name)

    def plugins(self) -> list[str]:
        return list(self._plugins)

    def dispose(self) -> None:
        for handle in reversed(list(self._plugins.values())):
            handle.dispose()

    async def aclose(self) -> None:
        """Stop every background task of the runtime (cancelled, then awaited), then unload
        the plugins."""
        await self.runtime.tasks.aclose()
        self.dispose()
