"""What an import appends to a log so that none of the scope it carries holds
(``policy/_imported.py``): exact events for a root and a delegated child."""

from __future__ import annotations

from typing import Any

from tether.policy._imported import import_narrowing
from tether.session import Event, SessionHeader

GRANT = {
    "id": "g1",
    "approval_id": "a1",
    "outcome": "allowed-for-session",
    "scope": {"kind": "tool", "rule": "Bash", "target_mode": "danger-full-access"},
}


def log(*events: tuple[str, dict[str, Any]]) -> list[Event]:
    return [Event.make(t, seq, 100 + seq, d) for seq, (t, d) in enumerate(events)]


def added(header: SessionHeader, events: list[Event]) -> list[tuple[str, int, int, Any]]:
    return [(e.type, e.seq, e.time, e.data) for e in import_narrowing(header, events, 999)]


def test_a_root_loses_its_grants_in_force_and_a_wide_mode() -> None:
    events = log(
        ("sandbox/mode", {"mode": "danger-full-access"}),
        ("approval/grant", GRANT),
        ("approval/grant", {**GRANT, "id": "g2"}),
        ("approval/grant-revoked", {"id": "g2", "by": "user"}),
    )
    assert added(SessionHeader("s", 1), events) == [
        ("approval/grant-revoked", 4, 999, {"id": "g1", "by": "import"}),
        ("sandbox/mode", 5, 999, {"mode": "read-only"}),
    ]


def test_a_narrow_log_imports_unchanged() -> None:
    events = log(("sandbox/mode", {"mode": "read-only"}), ("approval/policy", {"policy": "ask"}))
    assert added(SessionHeader("s", 1), events) == []
    assert added(SessionHeader("s", 1), []) == []


def test_a_child_is_narrowed_as_its_parent_would_and_an_unreadable_mode_is_replaced() -> None:
    child = SessionHeader("c", 1, parent_session="s", origin="subagent", delegation_depth=1)
    wide = log(("sandbox/mode", {"mode": "workspace-write", "source": "delegation"}))
    assert added(child, wide) == [
        ("sandbox/mode", 1, 999, {"mode": "read-only", "source": "parent"})
    ]
    unreadable = log(("sandbox/mode", {"mode": "everything"}))
    assert added(SessionHeader("s", 1), unreadable) == [
        ("sandbox/mode", 1, 999, {"mode": "read-only"})
    ]
