"""The agent inbox: what is waiting to reach the model, and when.

Three targets:

- ``next-turn`` (``followup``): becomes the only ordinary prompt of its own turn, and wakes.
- ``next-step`` (``steer``): claimed at the nearest step boundary, and wakes; several steers
  cost one step.
- ``inject``: model-facing context for the next step that does **not** wake an idle agent.

Every mutation is logged as ``agent/inbox/spliced`` so queued-but-unrun work is visible in the
durable log. An accepted message that was never claimed is not replayed after a crash.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from tether.agent._events import InboxSpliced, InboxTarget
from tether.session import JsonValue, Session

USER_SOURCE: Mapping[str, JsonValue] = {"kind": "user"}


@dataclass(frozen=True, slots=True)
class InboxItem:
    content: str
    source: Mapping[str, JsonValue] = field(default_factory=lambda: dict(USER_SOURCE))


class Inbox:
    def __init__(self, session: Session) -> None:
        self._session = session
        self._queues: dict[InboxTarget, deque[InboxItem]] = {
            "next-turn": deque(),
            "next-step": deque(),
            "inject": deque(),
        }

    def put(self, target: InboxTarget, item: InboxItem) -> None:
        queue = self._queues[target]
        spliced = InboxSpliced(target, len(queue), inserted=1)
        self._session.append(spliced.TYPE, spliced.to_data())
        queue.append(item)

    def pending(self, target: InboxTarget) -> int:
        return len(self._queues[target])

    def has_work(self) -> bool:
        """Whether a driver has something to start a turn with (inject alone does not wake)."""
        return bool(self._queues["next-turn"] or self._queues["next-step"])

    def take_turn_prompt(self) -> InboxItem | None:
        queue = self._queues["next-turn"]
        return queue.popleft() if queue else None

    def take_step_items(self) -> list[InboxItem]:
        """Everything claimed at a step boundary: steers, then injected context."""
        items = list(self._queues["next-step"]) + list(self._queues["inject"])
        self._queues["next-step"].clear()
        self._queues["inject"].clear()
        return items

    def clear(self) -> None:
        for target, queue in self._queues.items():
            if queue:
                spliced = InboxSpliced(target, 0, removed_count=len(queue))
                self._session.append(spliced.TYPE, spliced.to_data())
                queue.clear()
