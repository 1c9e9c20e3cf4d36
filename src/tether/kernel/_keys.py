"""Typed keys for the kernel's seams: a service, a notification, a waterfall, a gather.

A key is declared once, beside the code that owns the seam, and carries the types that cross
it, so a lookup or a listener is checked statically on both sides of a plugin boundary::

    APPROVAL: Final = ServiceKey[ApprovalService]("approval")
    service = ctx.require(APPROVAL)          # ApprovalService, or SERVICE_MISSING

    PRE_EXECUTE: Final = Waterfall[ToolCall, PreDecision]("tools/pre-execute")
    ctx.on(PRE_EXECUTE, gate)                # gate(call, next_) -> PreDecision

Keys compare by identity; their ``name`` is what logs and errors show, and must be unique
within a runtime (two keys with one name are a programming error, refused at use with
``KEY_CONFLICT``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Generic, TypeAlias, TypeVar, final

T = TypeVar("T")
P = TypeVar("P")
R = TypeVar("R")

Next: TypeAlias = Callable[[], Awaitable[R]]
"""What a waterfall listener calls to delegate to the rest of the chain (its result is the
rest of the chain's answer)."""


class _Key:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        if not name:
            raise ValueError("a kernel key needs a name")
        self.name = name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class AnyServiceKey(_Key):
    """A service key whatever its type: what a plugin's ``requires`` lists (the kernel only
    checks that something is provided under it)."""

    __slots__ = ()


@final
class ServiceKey(AnyServiceKey, Generic[T]):
    """A service of type ``T``: ``ctx.provide(key, service)``, ``ctx.get(key) -> T | None``,
    ``ctx.require(key) -> T``."""

    __slots__ = ()


@final
class Notice(_Key, Generic[P]):
    """A notification with payload ``P``: ``ctx.emit(key, payload)``; each listener is called
    with the payload, its result ignored (an awaitable one runs as an owned task)."""

    __slots__ = ()


@final
class Waterfall(_Key, Generic[P, R]):
    """A chain with payload ``P`` deciding an ``R``: each listener gets ``(payload, next_)``
    and returns an ``R`` (or ``await next_()`` to ask the rest of the chain)."""

    __slots__ = ()


@final
class Gather(_Key, Generic[P, R]):
    """Every listener called synchronously with payload ``P``; their ``R`` results are
    collected in order (guards that may only veto)."""

    __slots__ = ()


NoticeListener: TypeAlias = Callable[[P], object]
WaterfallListener: TypeAlias = Callable[[P, Next[R]], R | Awaitable[R]]
GatherListener: TypeAlias = Callable[[P], R]

__all__ = [
    "AnyServiceKey",
    "Gather",
    "GatherListener",
    "Next",
    "Notice",
    "NoticeListener",
    "ServiceKey",
    "Waterfall",
    "WaterfallListener",
]
