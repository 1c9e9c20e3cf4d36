"""How many tokens a model's context holds: the known defaults, and reading a client's.

The defaults cover the models tether names in its documentation and help; a configured
``context_window`` (``[models.NAME]`` in ``tether.toml``, or the client's constructor)
overrides them. A model without either has no known window, and the agent then never
compacts on its own (``docs/compaction.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

KNOWN_CONTEXT_WINDOWS: Final[Mapping[str, Mapping[str, int]]] = {
    "deepseek": {
        "deepseek-chat": 128_000,
        "deepseek-reasoner": 128_000,
    },
    "openai": {
        "gpt-4.1": 1_047_576,
        "gpt-4.1-mini": 1_047_576,
        "gpt-4.1-nano": 1_047_576,
        "gpt-4o": 128_000,
        "gpt-4o-mini": 128_000,
        "o3": 200_000,
        "o4-mini": 200_000,
    },
}
"""Context windows in tokens, by provider preset and model name, as the providers publish
them."""


def known_context_window(provider: str, model: str) -> int | None:
    """The published window of ``provider``'s ``model``, or ``None`` when tether knows none."""
    return KNOWN_CONTEXT_WINDOWS.get(provider, {}).get(model)


def context_window_of(client: object) -> int | None:
    """A model client's ``context_window`` when it has a positive one, else ``None``.

    Read by attribute: :class:`~tether.model._client.ModelClient` asks only for ``stream``, so
    a client without a window (a test double, a plugin's client) is simply one without."""
    window = getattr(client, "context_window", None)
    if isinstance(window, int) and not isinstance(window, bool) and window > 0:
        return window
    return None
