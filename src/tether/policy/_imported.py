"""An imported log keeps its history but none of the scope it carries
(``docs/decisions/0060-imported-logs-carry-no-scope.md``).

An export file is written by someone else, or edited by anyone who can reach it: its
``approval/grant`` events and its ``sandbox/mode`` are claims, not the user's answers. So
:func:`import_narrowing` gives, for one session of an import, the events appended after its own
before it is stored: an ``approval/grant-revoked {by: "import"}`` for every grant in force, and,
when its last mode is wider than ``read-only`` (or cannot be read), ``sandbox/mode read-only``
(``source: "parent"`` for a delegated child, as narrowing writes). Read-only is the one mode no
deployment default is narrower than. A log that holds neither imports unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from tether.errors import TetherError
from tether.policy._events import GrantRevoked, SandboxModeSet
from tether.policy._grants import fold_grants
from tether.policy._modes import PolicySource, SandboxMode
from tether.policy._sandbox_policy import fold_sandbox_mode
from tether.session import Event, SessionHeader

IMPORTED_BY: Final = "import"
"""Who revoked an imported grant (``approval/grant-revoked {by}``)."""


def import_narrowing(header: SessionHeader, events: Sequence[Event], time: int) -> list[Event]:
    """The events that end the scope ``events`` (one session's whole log) carry, numbered
    after them, at ``time`` (epoch milliseconds)."""
    added: list[Event] = []

    def append(event_type: str, data: dict[str, object]) -> None:
        added.append(Event.make(event_type, len(events) + len(added), time, data))

    for grant in fold_grants(header, events):
        append(GrantRevoked.TYPE, dict(GrantRevoked(grant.id, IMPORTED_BY).to_data()))
    try:
        mode = fold_sandbox_mode(events)
    except TetherError:  # unreadable: whatever it claimed, it is replaced
        mode = SandboxMode.DANGER_FULL_ACCESS
    if mode not in (None, SandboxMode.READ_ONLY):
        source: PolicySource | None = "parent" if header.delegation_depth > 0 else None
        narrowed = SandboxModeSet(SandboxMode.READ_ONLY, source)
        append(SandboxModeSet.TYPE, dict(narrowed.to_data()))
    return added


__all__ = ["IMPORTED_BY", "import_narrowing"]
