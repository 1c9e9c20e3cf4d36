"""What a persistence backend under test has, and what it may claim besides.

The six operations of :class:`~tether.session.persistence._base.Persistence` are required: every
backend has them, and their specs always run. The others are claims a backend (or its test
adapter) makes by listing them in :attr:`BackendUnderTest.capabilities
<tether.testing._subject.BackendUnderTest.capabilities>`; a check that needs an unclaimed one is
skipped, and the report says which claim was missing. A claimed capability that the adapter
does not implement fails its checks: a claim is a promise, not a hint.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class Capability(StrEnum):
    # -- the operations every backend has ----------------------------------------------------
    CREATE = "create"
    APPEND = "append"
    LOAD = "load"
    INSPECT = "inspect"
    LIST = "list"
    CLOSE = "close"
    # -- what the backend itself may offer ---------------------------------------------------
    REOPEN = "reopen"
    """Several handles onto one storage: a handle opened later sees what earlier ones
    committed, and live handles racing on one session never both win."""
    LIST_IDS = "list_ids"
    """``list_ids()`` (:class:`~tether.session.persistence._base.ListsIds`): every stored id
    without parsing headers."""
    DEFERS_SYNC = "defers_sync"
    """``append_deferred``, ``create_deferred`` and ``sync``
    (:class:`~tether.session.persistence._base.DefersSync`): commits that wait for the disk
    only when asked, under every rule of a commit."""
    # -- damage the adapter can do to stored data, as a crash or a newer writer would --------
    CORRUPT_TAIL = "corrupt_tail"
    """``corrupt_tail``: leave a torn final record, as a crash mid-write would."""
    CORRUPT_RECORD = "corrupt_record"
    """``corrupt_record``: damage one complete record in the middle of the log."""
    SET_FORMAT_VERSION = "set_format_version"
    """``set_format_version``: make a stored header claim another format version."""
    STORAGE_SNAPSHOT = "storage_snapshot"
    """``storage_snapshot``: a value that changes whenever the stored bytes change."""


REQUIRED: Final = frozenset(
    {
        Capability.CREATE,
        Capability.APPEND,
        Capability.LOAD,
        Capability.INSPECT,
        Capability.LIST,
        Capability.CLOSE,
    }
)
"""The operations of the ``Persistence`` protocol: implied for every backend under test."""

OPTIONAL: Final = frozenset(Capability) - REQUIRED
"""What a backend under test must claim for the checks that need it to run."""


__all__ = ["OPTIONAL", "REQUIRED", "Capability"]
