"""What a model's tokens cost: the list prices of the models tether names, and reading a
client's.

Prices are US dollars per million tokens, as the providers list them for their standard tier
(no cache or batch discounts). A configured ``price`` (``[models.NAME]`` in ``tether.toml``:
``price = {input = 0.27, output = 1.10}``) overrides them; a model with neither has no known
price, and ``tether run`` then reports no cost rather than a guess (``docs/cli.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from tether.model._types import Usage

PER_TOKENS: Final = 1_000_000


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million input (prompt) and output (completion) tokens."""

    input: float
    output: float

    def cost(self, usage: Usage) -> float:
        return (usage.prompt_tokens * self.input + usage.completion_tokens * self.output) / (
            PER_TOKENS
        )


KNOWN_PRICES: Final[Mapping[str, Mapping[str, Price]]] = {
    "deepseek": {
        "deepseek-chat": Price(0.27, 1.10),
        "deepseek-reasoner": Price(0.55, 2.19),
    },
    "openai": {
        "gpt-4.1": Price(2.00, 8.00),
        "gpt-4.1-mini": Price(0.40, 1.60),
        "gpt-4.1-nano": Price(0.10, 0.40),
        "gpt-4o": Price(2.50, 10.00),
        "gpt-4o-mini": Price(0.15, 0.60),
        "o3": Price(2.00, 8.00),
        "o4-mini": Price(1.10, 4.40),
    },
}
"""List prices by provider preset and model name (``docs/models.md`` has the table)."""


def known_price(provider: str, model: str) -> Price | None:
    return KNOWN_PRICES.get(provider, {}).get(model)


def price_of(client: object) -> Price | None:
    """A model client's ``price`` when it has one (read by attribute, as the context window
    is: a client that declares none simply has no known price)."""
    price = getattr(client, "price", None)
    return price if isinstance(price, Price) else None
