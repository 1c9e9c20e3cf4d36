"""What a run used, counted from the events it committed: tokens, model requests of the root,
time and cost; the fields ``run/result`` and the ``json``/``stream-json`` result carry.

Tokens and cost add up every session of the run (its subagents' requests are paid for too);
``num_turns`` counts the root's model replies, as Claude Code's ``num_turns`` counts its
assistant turns. The cost is known only when the model has a price (``model/_prices.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tether._harness import SessionEvent
from tether.agent._events import AssistantMessage
from tether.model._prices import Price
from tether.model._types import Usage


@dataclass(slots=True)
class RunTotals:
    root_id: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    root_replies: int = 0
    sessions: set[str] = field(default_factory=set)

    def add(self, item: SessionEvent) -> None:
        self.sessions.add(item.session_id)
        if item.event.type != AssistantMessage.TYPE:
            return
        usage = AssistantMessage.parse(item.event.data).usage
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens
        if item.session_id == self.root_id:
            self.root_replies += 1

    @property
    def usage(self) -> Usage:
        return Usage(self.prompt_tokens, self.completion_tokens)

    def fields(self, duration_ms: int, price: Price | None) -> dict[str, object]:
        """``usage``, ``duration_ms``, ``num_turns`` and, when priced, ``total_cost_usd``."""
        out: dict[str, object] = {
            "usage": {"input_tokens": self.prompt_tokens, "output_tokens": self.completion_tokens},
            "duration_ms": duration_ms,
            "num_turns": self.root_replies,
        }
        if price is not None:
            out["total_cost_usd"] = round(price.cost(self.usage), 6)
        return out
