"""Runtime and Context: services, notifications, waterfalls, and disposal.

Every seam is named by a typed key (:mod:`tether.kernel._keys`) declared beside its owner.
Services are looked up with ``ctx.get(key)`` at the moment of use and may be absent (``None``):
a consumer that needs the approval service fails that one call closed instead of refusing to
start. Listeners are global or scoped to one agent; a listener scoped to another agent is never
called. Every registration returns a :class:`Disposable`, and a plugin's context disposes all
of its registrations, in reverse order, when the plugin is unloaded.

An async notification listener runs as a task of the runtime's :class:`TaskScope`, so closing
the kernel cancels and awaits it. Once the scope is closed a notification still reaches the
synchronous listeners, but an async one is not started (its coroutine is closed, and a warning
says so): nothing is left to own it.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from types import CoroutineType
from typing import Final, TypeGuard, TypeVar, cast, overload

from tether.errors import TetherError
from tether.kernel._keys import (
    AnyServiceKey,
    Gather,
    Notice,
    ServiceKey,
    Waterfall,
    WaterfallListener,
    _Key,
)
from tether.kernel._prompt import PromptPart, PromptRegistry, PromptText
from tether.kernel._tasks import TaskScope, TaskScopeClosedError

log = logging.getLogger(__name__)
T = TypeVar("T")
P = TypeVar("P")
R = TypeVar("R")


class ServiceConflictError(TetherError):
    code = "SERVICE_CONFLICT"


class ServiceMissingError(TetherError):
    """A seam that needs a service found none composed."""

    code = "SERVICE_MISSING"


class KeyConflictError(TetherError):
    """Two different keys with one name were used in one runtime."""

    code = "KEY_CONFLICT"


class NotAKeyError(TetherError):
    """A seam was named by something other than a typed key (a bare name, from untyped code)."""

    code = "NOT_A_KEY"


class Disposable:
    """A registration handle. Calling :meth:`dispose` twice is harmless."""

    __slots__ = ("_fn",)

    def __init__(self, fn: Callable[[], None]) -> None:
        self._fn: Callable[[], None] | None = fn

    def dispose(self) -> None:
        fn, self._fn = self._fn, None
        if fn is not None:
            fn()

    @property
    def disposed(self) -> bool:
        return self._fn is None

    def __call__(self) -> None:
        self.dispose()


class _Tracked(Disposable):
    """A registration a context made: disposing it also forgets it there. (A closure that
    named its own handle would be a reference cycle per registration, left to the cyclic
    collector once disposed.)"""

    __slots__ = ("_registrations",)

    def __init__(self, fn: Callable[[], None], registrations: list[Disposable]) -> None:
        super().__init__(fn)
        self._registrations: list[Disposable] | None = registrations

    def dispose(self) -> None:
        super().dispose()
        registrations, self._registrations = self._registrations, None
        if registrations is not None and self in registrations:
            registrations.remove(self)


@dataclass(eq=False, slots=True)
class _Listener:
    fn: Callable[..., object]
    scope: object | None
    active: bool = True


class Runtime:
    """The composition root: one service table and one listener table."""

    def __init__(self) -> None:
        self._services: dict[str, object] = {}
        self._listeners: dict[str, list[_Listener]] = {}
        self._keys: dict[str, _Key] = {}
        self.prompt = PromptRegistry()
        self.tasks = TaskScope()
        """Every background task of this runtime (:meth:`Context.spawn`)."""
        self.root = Context(self)

    # The context API is the public face; these are its storage operations.
    def _name(self, key: _Key) -> str:
        """The table name of ``key``; a second key object with a name already used is refused,
        since the two would silently share one service or one chain."""
        if not isinstance(key, _Key):
            # Only untyped code (a plugin from an entry point) gets here; say what to pass.
            raise NotAKeyError(
                f"kernel seams are named by typed keys (tether.kernel._keys), not {key!r}"
            )
        known = self._keys.setdefault(key.name, key)
        if known is not key:
            raise KeyConflictError(
                f"two different keys are named {key.name!r} ({known!r} and {key!r})"
            )
        return key.name

    def _provide(self, name: str, service: object) -> Callable[[], None]:
        if name in self._services:
            raise ServiceConflictError(f"service {name!r} is already provided")
        self._services[name] = service

        def remove() -> None:
            if self._services.get(name) is service:
                del self._services[name]

        return remove

    def _add_listener(self, name: str, entry: _Listener, prepend: bool) -> Callable[[], None]:
        chain = self._listeners.setdefault(name, [])
        if prepend:
            chain.insert(0, entry)
        else:
            chain.append(entry)

        def remove() -> None:
            entry.active = False
            if entry in chain:
                chain.remove(entry)

        return remove

    def _chain(self, name: str, scope: object | None) -> list[_Listener]:
        return [
            entry
            for entry in self._listeners.get(name, ())
            if entry.scope is None or (scope is not None and entry.scope is scope)
        ]

    def _listen_in_background(self, awaitable: Awaitable[object], name: str) -> None:
        """Run an async notification listener as a task of this runtime, its failure logged."""
        coro = awaitable if inspect.iscoroutine(awaitable) else _awaiting(awaitable)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            # Emitted outside an event loop: nothing could ever run it, so say so instead of
            # leaving a never-awaited coroutine behind.
            coro.close()
            log.error("async listener for %r needs a running event loop; not run", name)
            return
        try:
            task = self.tasks.spawn(coro, name=f"listener for {name!r}", report=False)
        except TaskScopeClosedError:
            log.warning("async listener for %r not run: the runtime has shut down", name)
            return

        def done(finished: asyncio.Task[object]) -> None:
            if not finished.cancelled() and finished.exception() is not None:
                log.error("async listener for %r failed: %s", name, finished.exception())

        task.add_done_callback(done)


class Context:
    """A view of the runtime that remembers what it registered, so it can undo all of it."""

    def __init__(self, runtime: Runtime, *, owner: str | None = None) -> None:
        self.runtime = runtime
        self.owner = owner
        self._registrations: list[Disposable] = []
        self._forget: Callable[[], None] | None = None

    # -- services ---------------------------------------------------------------------------
    @overload
    def get(self, key: ServiceKey[T]) -> T | None: ...
    @overload
    def get(self, key: AnyServiceKey) -> object | None: ...
    def get(self, key: AnyServiceKey) -> object | None:
        """The live service for ``key``, or ``None``. Creates no dependency."""
        return self.runtime._services.get(self.runtime._name(key))

    def require(self, key: ServiceKey[T]) -> T:
        """The live service for ``key``; :class:`ServiceMissingError` when none is composed."""
        service = self.get(key)
        if service is None:
            raise ServiceMissingError(f"service {key.name!r} is not composed")
        return service

    def provide(self, key: ServiceKey[T], service: T) -> Disposable:
        return self._track(self.runtime._provide(self.runtime._name(key), service))

    # -- listeners --------------------------------------------------------------------------
    @overload
    def on(
        self,
        key: Notice[P],
        fn: Callable[[P], object],
        *,
        prepend: bool = False,
        scope: object | None = None,
    ) -> Disposable: ...
    @overload
    def on(
        self,
        key: Waterfall[P, R],
        fn: WaterfallListener[P, R],
        *,
        prepend: bool = False,
        scope: object | None = None,
    ) -> Disposable: ...
    @overload
    def on(
        self,
        key: Gather[P, R],
        fn: Callable[[P], R],
        *,
        prepend: bool = False,
        scope: object | None = None,
    ) -> Disposable: ...
    def on(
        self,
        key: _Key,
        fn: Callable[..., object],
        *,
        prepend: bool = False,
        scope: object | None = None,
    ) -> Disposable:
        """Listen to ``key``. ``scope`` limits the listener to dispatches for that agent."""
        entry = _Listener(fn, scope)
        return self._track(self.runtime._add_listener(self.runtime._name(key), entry, prepend))

    def emit(self, key: Notice[P], payload: P, *, scope: object | None = None) -> None:
        """Notify every matching listener. A failing listener is logged and contained; an
        async one runs as a task of the runtime (see the module docstring)."""
        name = self.runtime._name(key)
        for entry in self.runtime._chain(name, scope):
            try:
                result = entry.fn(payload)
            except Exception:
                log.exception("listener for %r failed", name)
                continue
            if _awaitable(result):
                self.runtime._listen_in_background(result, name)

    def collect(self, key: Gather[P, R], payload: P, *, scope: object | None = None) -> list[R]:
        """Call every matching listener synchronously and return their results in order.

        Used for guards: each listener may only veto, so all of them run. Exceptions propagate.
        """
        chain = self.runtime._chain(self.runtime._name(key), scope)
        # The table stores listeners untyped; ``on`` admitted each under this key's types.
        return cast(list[R], [entry.fn(payload) for entry in chain])

    async def waterfall(
        self,
        key: Waterfall[P, R],
        payload: P,
        fallback: Callable[[], Awaitable[R]] | Callable[[], R] | R,
        *,
        scope: object | None = None,
    ) -> R:
        """Run listeners in order; each gets ``(payload, next)``.

        A listener that returns without awaiting ``next()`` short-circuits the rest. The
        fallback (a value, or a callable producing one) is the terminal ``next``. Exceptions
        propagate to the caller, which decides how to fail closed.
        """
        chain = self.runtime._chain(self.runtime._name(key), scope)
        # As in ``collect``: ``on`` checked each listener against this key's types.
        return cast(R, await _Chain(chain, payload, fallback).call(0))

    # -- prompt ---------------------------------------------------------------------------
    def section(
        self, name: str, order: float, text: PromptText, *, scope: object | None = None
    ) -> Disposable:
        """A stable system-prompt section (logged in ``request/header``)."""
        return self._track(self.runtime.prompt.add(PromptPart("section", name, order, text, scope)))

    def context(
        self, name: str, order: float, text: PromptText, *, scope: object | None = None
    ) -> Disposable:
        """A runtime context, rendered per request into the snapshot message."""
        return self._track(self.runtime.prompt.add(PromptPart("context", name, order, text, scope)))

    # -- lifetime ---------------------------------------------------------------------------
    def spawn(
        self, coro: Coroutine[object, object, T], *, name: str, report: bool = True
    ) -> asyncio.Task[T]:
        """Run ``coro`` as a background task owned by the runtime: cancelled and awaited when
        the kernel closes (:meth:`tether.kernel.Kernel.aclose`), never left running."""
        return self.runtime.tasks.spawn(coro, name=name, report=report)

    def effect(self, dispose: Callable[[], None]) -> Disposable:
        """Tie a resource's cleanup to this context's lifetime."""
        return self._track(dispose)

    def child(self, owner: str) -> Context:
        """A context whose registrations are undone together (a plugin's or an agent's).

        Disposing the parent disposes the child; disposing the child alone also forgets it in
        the parent, so short-lived children (subagents) do not accumulate.
        """
        ctx = Context(self.runtime, owner=owner)
        ctx._forget = self._track(ctx._dispose_registrations).dispose
        return ctx

    def dispose(self) -> None:
        """Undo every registration made through this context, newest first."""
        self._dispose_registrations()
        forget, self._forget = self._forget, None
        if forget is not None:
            forget()

    def _dispose_registrations(self) -> None:
        while self._registrations:
            handle = self._registrations.pop()
            try:
                handle.dispose()
            except Exception:
                log.exception("disposing a registration of %r failed", self.owner)

    def _track(self, fn: Callable[[], None]) -> Disposable:
        handle = _Tracked(fn, self._registrations)
        self._registrations.append(handle)
        return handle


class _Chain:
    """One run of a waterfall. A method, not a closure that calls itself: such a closure is a
    reference cycle (the function holds the cell that holds the function), garbage only the
    cyclic collector frees, made on every run of every waterfall."""

    __slots__ = ("chain", "fallback", "payload")

    def __init__(self, chain: list[_Listener], payload: object, fallback: object) -> None:
        self.chain = chain
        self.payload = payload
        self.fallback = fallback

    async def call(self, index: int) -> object:
        chain = self.chain
        # A listener disposed while the chain runs (its plugin unloaded mid-question) is
        # skipped: an unloaded answerer must not answer.
        while index < len(chain) and not chain[index].active:
            index += 1
        if index == len(chain):
            fallback = self.fallback
            value = fallback() if callable(fallback) else fallback
            return await value if _awaitable(value) else value
        result = chain[index].fn(self.payload, lambda: self.call(index + 1))
        return await result if _awaitable(result) else result


def _awaitable(value: object) -> TypeGuard[Awaitable[object]]:
    """``inspect.isawaitable``, without its ABC check (a Python-level ``__instancecheck__``)
    for what listeners return nearly always: a coroutine, or a plain value."""
    kind = type(value)
    if kind is CoroutineType:
        return True
    if kind in _PLAIN:
        return False
    return inspect.isawaitable(value)


_PLAIN: Final = frozenset({type(None), str, bool, int, float, tuple, list, dict})


async def _awaiting(awaitable: Awaitable[T]) -> T:
    return await awaitable
