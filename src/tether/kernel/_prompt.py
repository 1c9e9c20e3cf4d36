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
    """Every registered part; the nearest scope wins a name (a child may shadow a section).

    Parts are kept by scope (the unscoped ones, and each agent's own), so assembling one
    agent's prompt reads the unscoped parts and its own, never every other agent's: a
    thousand children each with a scoped context cost a request what one does. Which parts
    apply to an agent, in which order, is worked out once and kept until a part of its own or
    an unscoped one is added or removed; their texts are rendered on every request.
    """

    def __init__(self) -> None:
        self._serial = 0
        self._parts: dict[int | None, dict[int, PromptPart]] = {}
        """``id(scope)`` (``None``: unscoped) -> registration number -> part. A part holds its
        scope, so an id stays taken while it is registered."""
        self._changed: dict[int | None, int] = {}
        """For each table above, the serial of its last change (a number never used twice, so
        a table made again for a new scope with a reused id never looks unchanged)."""
        self._chosen: dict[tuple[str, int | None], tuple[int, int, tuple[PromptPart, ...]]] = {}
        """``(kind, scope key)`` -> the changes of the unscoped and the scope's table it was
        chosen at, and the parts chosen."""

    def add(self, part: PromptPart) -> Callable[[], None]:
        key = None if part.scope is None else id(part.scope)
        serial = self._next()
        self._parts.setdefault(key, {})[serial] = part
        self._changed[key] = serial

        def remove() -> None:
            table = self._parts.get(key)
            if table is not None and table.pop(serial, None) is not None:
                self._changed[key] = self._next()
                if not table:
                    del self._parts[key]
                    if key is not None:
                        # The scope is gone: nothing chosen for it is asked for again.
                        del self._changed[key]
                        self._chosen.pop(("section", key), None)
                        self._chosen.pop(("context", key), None)

        return remove

    def _next(self) -> int:
        self._serial += 1
        return self._serial

    def parts(
        self, kind: Literal["section", "context"], agent: HasSession | None
    ) -> tuple[PromptPart, ...]:
        """Parts of ``kind`` that apply to ``agent``, one per name, sorted by order (equal
        orders by registration: of the first part of that name that applies)."""
        key = id(agent) if agent is not None and id(agent) in self._parts else None
        unscoped = self._changed.get(None, 0)
        scoped = self._changed.get(key, 0) if key is not None else 0
        kept = self._chosen.get((kind, key))
        if kept is not None and kept[0] == unscoped and kept[1] == scoped:
            return kept[2]
        chosen = self._choose(kind, agent)
        self._chosen[(kind, key)] = (unscoped, scoped, chosen)
        return chosen

    def _choose(
        self, kind: Literal["section", "context"], agent: HasSession | None
    ) -> tuple[PromptPart, ...]:
        chosen: dict[str, tuple[int, PromptPart]] = {}
        for serial, part in self._parts.get(None, {}).items():
            if part.kind == kind and part.name not in chosen:
                chosen[part.name] = (serial, part)
        scoped = self._parts.get(id(agent), {}) if agent is not None else {}
        shadowed: set[str] = set()
        for serial, part in scoped.items():
            if part.kind != kind or part.scope is not agent or part.name in shadowed:
                continue
            shadowed.add(part.name)
            first = chosen.get(part.name)
            chosen[part.name] = (serial if first is None else min(first[0], serial), part)
        ranked = sorted(chosen.values(), key=lambda entry: (entry[1].order, entry[0]))
        return tuple(part for _, part in ranked)

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
