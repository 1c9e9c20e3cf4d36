"""The backend under test: how the kit opens it, what it claims, how it damages stored data."""

from __future__ import annotations

from collections.abc import Awaitable
from pathlib import Path
from typing import ClassVar

from tether.session.persistence._base import Persistence
from tether.testing._capabilities import REQUIRED, Capability


class BackendUnderTest:
    """Subclass it for one backend: override :meth:`open`, list what else it claims in
    :attr:`capabilities`, and implement the hook of every damage capability claimed.

    ``open`` may be called more than once in a check with the same ``root``: every call must
    return a new, independent handle onto the same storage (that is how the ``reopen`` checks
    see what survives a restart and race two writers). Every method may be sync or async.
    """

    capabilities: ClassVar[frozenset[Capability]] = frozenset()
    """The optional capabilities claimed (the operations are implied)."""

    @property
    def name(self) -> str:
        """How reports name this backend."""
        return type(self).__name__

    def claims(self) -> frozenset[Capability]:
        """Everything the backend under test has: the operations and what it claims."""
        return REQUIRED | self.capabilities

    def open(self, root: Path) -> Persistence | Awaitable[Persistence]:
        """A new handle onto the storage that lives under ``root`` (an empty directory at the
        start of each check)."""
        raise NotImplementedError("override open(root)")

    def corrupt_tail(self, persistence: Persistence, session_id: str) -> Awaitable[None] | None:
        """Leave an incomplete final record after the stored events (a crash mid-write)."""
        raise NotImplementedError

    def corrupt_record(
        self, persistence: Persistence, session_id: str, seq: int
    ) -> Awaitable[None] | None:
        """Make the stored event ``seq`` unreadable, keeping the records after it intact."""
        raise NotImplementedError

    def set_format_version(
        self, persistence: Persistence, session_id: str, version: int
    ) -> Awaitable[None] | None:
        """Make the stored header of ``session_id`` claim format ``version``."""
        raise NotImplementedError

    def storage_snapshot(self, persistence: Persistence) -> object:
        """A value equal between two calls exactly when no stored byte changed."""
        raise NotImplementedError


__all__ = ["BackendUnderTest"]
