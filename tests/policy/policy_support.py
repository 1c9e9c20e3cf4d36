"""Shared helpers for the policy tests: a small agent, an in-memory backend, composition.

``MemoryPersistence`` is a real implementation of the persistence protocol (events are stored
as their JSON text and parsed back on load, so a store round trip exercises serialization). It
can be made slow (each append yields to the loop a few times, so the store's write-behind lags
behind appends) or broken (every append fails), which is what the durability tests need.
"""

from __future__ import annotations

import asyncio
import builtins
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from event_support import type_data
from tether.kernel import SESSIONS_SERVICE
from tether.kernel._plugin import Kernel
from tether.policy import (
    APPROVAL_SERVICE,
    PERMISSION_PRESETS_SERVICE,
    SANDBOX_POLICY_SERVICE,
    ApprovalService,
    PermissionPresetsService,
    SandboxPolicyService,
)
from tether.policy._approval import approval_plugin
from tether.policy._presets import permission_presets_plugin
from tether.policy._sandbox_policy import sandbox_policy_plugin
from tether.session import (
    Event,
    JsonValue,
    PersistenceError,
    SeqConflictError,
    Session,
    SessionExistsError,
    SessionHeader,
    SessionNotFoundError,
    SessionStore,
    StoredSession,
)


@dataclass(eq=False)
class ToyAgent:
    """The smallest agent the policy layer accepts: a session, an identity, an inbox."""

    session: Session
    notices: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def inject(self, text: str, *, source: Mapping[str, JsonValue]) -> None:
        self.notices.append((text, dict(source)))


@dataclass(eq=False)
class SessionOnlyAgent:
    """An agent without an inbox (``inject``)."""

    session: Session


class MemoryPersistence:
    def __init__(self, *, append_yields: int = 0, fail_appends: bool = False) -> None:
        self.headers: dict[str, str] = {}
        self.records: dict[str, list[str]] = {}
        self.append_yields = append_yields
        self.fail_appends = fail_appends

    async def create(self, header: SessionHeader) -> None:
        if header.id in self.headers:
            raise SessionExistsError(f"session {header.id!r} exists")
        self.headers[header.id] = json.dumps(header.to_dict())
        self.records[header.id] = []

    async def append(self, session_id: str, events: Sequence[Event]) -> None:
        for _ in range(self.append_yields):
            await asyncio.sleep(0)
        if self.fail_appends:
            raise PersistenceError("disk full (simulated)")
        if session_id not in self.records:
            raise SessionNotFoundError(session_id)
        stored = self.records[session_id]
        if events and events[0].seq != len(stored):
            raise SeqConflictError(f"expected seq {len(stored)}, got {events[0].seq}")
        stored.extend(event.to_json() for event in events)

    async def load(self, session_id: str) -> StoredSession:
        return await self.inspect(session_id)

    async def inspect(self, session_id: str) -> StoredSession:
        if session_id not in self.headers:
            raise SessionNotFoundError(session_id)
        header = SessionHeader.from_dict(json.loads(self.headers[session_id]))
        return StoredSession(header, tuple(Event.from_json(r) for r in self.records[session_id]))

    async def list(self) -> builtins.list[SessionHeader]:
        return [SessionHeader.from_dict(json.loads(h)) for h in self.headers.values()]

    async def close(self) -> None:
        pass

    def stored_types(self, session_id: str) -> builtins.list[str]:
        return [json.loads(r)["type"] for r in self.records.get(session_id, [])]


layout = type_data
"""``(type, data)`` of each event from ``start``: the exact-layout assertion form."""


def open_turn(session: Session, turn: int = 1) -> None:
    session.append("turn/start", {"turn": turn})


def close_turn(session: Session, turn: int = 1) -> None:
    session.append("turn/end", {"turn": turn, "reason": "completed"})


def compose(
    *,
    store: SessionStore | None = None,
    sandbox: Mapping[str, Any] | None = None,
    approval: Mapping[str, Any] | None = None,
    presets: Mapping[str, Any] | None = None,
) -> Kernel:
    """A kernel with the store as ``sessions`` and the policy plugins whose config is given."""
    kernel = Kernel()
    if store is not None:
        kernel.ctx.provide(SESSIONS_SERVICE, store)
    if sandbox is not None:
        kernel.load(sandbox_policy_plugin, sandbox)
    if approval is not None:
        kernel.load(approval_plugin, approval)
    if presets is not None:
        kernel.load(permission_presets_plugin, presets)
    return kernel


def sandbox_of(kernel: Kernel) -> SandboxPolicyService:
    service = kernel.ctx.get(SANDBOX_POLICY_SERVICE)
    assert isinstance(service, SandboxPolicyService)
    return service


def approval_of(kernel: Kernel) -> ApprovalService:
    service = kernel.ctx.get(APPROVAL_SERVICE)
    assert isinstance(service, ApprovalService)
    return service


def presets_of(kernel: Kernel) -> PermissionPresetsService:
    service = kernel.ctx.get(PERMISSION_PRESETS_SERVICE)
    assert isinstance(service, PermissionPresetsService)
    return service
