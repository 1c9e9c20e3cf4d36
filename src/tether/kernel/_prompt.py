"""The prompt registry: system-prompt sections and runtime contexts.

Sections are the stable system prompt (sorted by order). Contexts are per-request facts (the
sandbox mode, the approval policy, the delegation statement) that the agent renders into one
runtime-context snapshot message; keeping them out of the system prompt keeps the prompt
prefix cache-stable across policy switches (``agent/_context_snapshot.py``).

Both are registered through a :class:`~tether.kernel.Context`, so they die with their plugin,
and both may be scoped to one agent (a child's delegation statement is not its parent's).
A text function receives the agent being assembled, or ``None`` for an agentless assembly, and
returns ``""`` for "no contribution".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeAlias

from tether.session import HasSession

PromptText: TypeAlias = str | Callable[[HasSession | None], str]


@dataclass(frozen=True, eq=False, slots=True)
class PromptPart:
    kind: Literal["section", "context"]
    name: str
    order: float
    text: PromptText
    scope: object | None = None

    def render(self, agent: HasSession | None) -> str:
        return self.text(agent) if callable(self.text) else self.text


class PromptRegistry:
    """Every registered part; the nearest scope wins a name (a child may shadow a section)."""

    def __init__(self) -> None:
        self._parts: list[PromptPart] = []

    def add(self, part: PromptPart) -> Callable[[], None]:
        self._parts.append(part)

        def remove() -> None:
            if part in self._parts:
                self._parts.remove(part)

        return remove

    def parts(
        self, kind: Literal["section", "context"], agent: HasSession | None
    ) -> list[PromptPart]:
        """Parts of ``kind`` that apply to ``agent``, one per name, sorted by order."""
        chosen: dict[str, PromptPart] = {}
        for part in self._parts:
            if part.kind != kind:
                continue
            if part.scope is not None and part.scope is not agent:
                continue
            current = chosen.get(part.name)
            if current is None or (current.scope is None and part.scope is not None):
                chosen[part.name] = part
        return sorted(chosen.values(), key=lambda p: p.order)

    def render(
        self, kind: Literal["section", "context"], agent: HasSession | None
    ) -> list[tuple[str, str]]:
        """``(name, text)`` for each non-empty contribution, in order."""
        out: list[tuple[str, str]] = []
        for part in self.parts(kind, agent):
            text = part.render(agent)
            if text:
                out.append((part.name, text))
        return out
