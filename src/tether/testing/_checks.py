"""What a spec is made of: checks, the trial each one runs in, and ``raises``.

A check is a plain async function over a :class:`Trial` that fails by raising (a plain
``assert`` or :func:`raises`); it needs no test framework.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from tether.session._events import Event
from tether.session.persistence._base import Persistence
from tether.testing._capabilities import Capability
from tether.testing._fixtures import header
from tether.testing._subject import BackendUnderTest

E = TypeVar("E", bound=BaseException)
CheckBody = Callable[["Trial"], Awaitable[None]]


async def settled(value: object) -> object:
    """``value``, awaited if it is awaitable (a backend's methods may be sync or async)."""
    if inspect.isawaitable(value):
        return await value
    return value


async def open_handle(subject: BackendUnderTest, root: Path) -> Persistence:
    handle = await settled(subject.open(root))
    assert isinstance(handle, Persistence), (
        f"{subject.name}.open() returned {type(handle).__name__}, not a Persistence"
    )
    return handle


@dataclass(frozen=True, slots=True)
class Trial:
    """One check's run: the backend under test, an empty storage root, and a first handle
    onto it (the runner closes that handle when the check ends)."""

    subject: BackendUnderTest
    root: Path
    persistence: Persistence

    @asynccontextmanager
    async def another_handle(self) -> AsyncIterator[Persistence]:
        """A second handle onto the same storage, closed on exit (needs ``reopen``)."""
        handle = await open_handle(self.subject, self.root)
        try:
            yield handle
        finally:
            await handle.close()

    async def stored(self, events: Sequence[Event]) -> str:
        """Create session ``s-1`` with :func:`header` and append ``events`` to it."""
        await self.persistence.create(header())
        await self.persistence.append("s-1", events)
        return "s-1"

    async def corrupt_tail(self, session_id: str) -> None:
        await self._damage(
            Capability.CORRUPT_TAIL, self.subject.corrupt_tail, self.persistence, session_id
        )

    async def corrupt_record(self, session_id: str, seq: int) -> None:
        await self._damage(
            Capability.CORRUPT_RECORD,
            self.subject.corrupt_record,
            self.persistence,
            session_id,
            seq,
        )

    async def set_format_version(self, session_id: str, version: int) -> None:
        await self._damage(
            Capability.SET_FORMAT_VERSION,
            self.subject.set_format_version,
            self.persistence,
            session_id,
            version,
        )

    async def storage_snapshot(self) -> object:
        return await self._damage(
            Capability.STORAGE_SNAPSHOT, self.subject.storage_snapshot, self.persistence
        )

    async def snapshot_if_claimed(self) -> object:
        """The storage snapshot when the backend claims ``storage_snapshot``, else ``None``."""
        if Capability.STORAGE_SNAPSHOT in self.subject.claims():
            return await self.storage_snapshot()
        return None

    async def _damage(
        self, capability: Capability, hook: Callable[..., object], *args: object
    ) -> object:
        try:
            return await settled(hook(*args))
        except NotImplementedError:
            raise AssertionError(
                f"{self.subject.name} claims {capability.value} but does not implement "
                f"{capability.value}()"
            ) from None


@dataclass(frozen=True, slots=True)
class Check:
    """One rule of the contract, in the spec of ``capability``; runs only where the backend
    has everything in :attr:`needs`."""

    capability: Capability
    body: CheckBody
    needs: frozenset[Capability]

    @property
    def name(self) -> str:
        return self.body.__name__

    def __str__(self) -> str:
        return f"{self.capability.value}/{self.name}"


@dataclass(slots=True)
class Spec:
    """The checks of one capability, in the order they are declared."""

    capability: Capability
    checks: list[Check] = field(default_factory=list)

    def check(self, *needs: Capability) -> Callable[[CheckBody], CheckBody]:
        """Declare the decorated function a check of this spec, needing ``needs`` besides
        this spec's own capability."""

        def register(body: CheckBody) -> CheckBody:
            self.checks.append(Check(self.capability, body, frozenset({self.capability, *needs})))
            return body

        return register


@dataclass(slots=True)
class Caught(Generic[E]):
    """What :func:`raises` caught (set once the block has raised)."""

    value: E | None = None

    @property
    def error(self) -> E:
        assert self.value is not None, "nothing was caught yet"
        return self.value


@contextmanager
def raises(kind: type[E]) -> Iterator[Caught[E]]:
    """Fail unless the block raises ``kind`` (or a subclass); other errors propagate."""
    caught: Caught[E] = Caught()
    try:
        yield caught
    except kind as err:
        caught.value = err
        return
    raise AssertionError(f"expected {kind.__name__}, nothing was raised")


__all__ = [
    "Caught",
    "Check",
    "CheckBody",
    "Spec",
    "Trial",
    "open_handle",
    "raises",
    "settled",
]
