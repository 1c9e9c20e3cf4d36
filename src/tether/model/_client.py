"""The one interface the agent layer calls: :class:`ModelClient`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable

from tether._signals import AbortSignal
from tether.model._types import Completion, ModelError, ModelRequest, StreamEvent


@runtime_checkable
class ModelClient(Protocol):
    """Anything that answers a :class:`ModelRequest` with a stream of events.

    Contract:

    - ``stream`` yields :data:`StreamDelta` items, then exactly one :class:`Completion`, which
      is always the last item; or it raises :class:`ModelError`.
    - When ``signal`` fires, the stream stops, releases what it holds (an HTTP response is
      closed) and raises :class:`tether._signals.AbortedError`.
    - Closing the iterator early (``aclose``) releases the same resources.
    """

    def stream(
        self, request: ModelRequest, signal: AbortSignal | None = None
    ) -> AsyncIterator[StreamEvent]: ...


async def complete(
    client: ModelClient, request: ModelRequest, signal: AbortSignal | None = None
) -> Completion:
    """Run ``client.stream`` to the end and return its :class:`Completion`."""
    events = client.stream(request, signal)
    final: Completion | None = None
    try:
        async for event in events:
            if isinstance(event, Completion):
                final = event
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
    if final is None:
        raise ModelError(
            f"{type(client).__name__}.stream ended without a Completion",
            code="MODEL_BAD_RESPONSE",
        )
    return final
