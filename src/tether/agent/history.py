"""Model history is derived from surface events only; log-only events never reach the model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tether.model import Message, ToolCall
from tether.session import Event


def history(events: Sequence[Event]) -> list[Message]:
    messages: list[Message] = []
    for event in events:
        data = event.data
        if event.type == "user/message":
            messages.append(Message.user(str(data.get("content", ""))))
        elif event.type == "assistant/message":
            raw_calls = data.get("tool_calls", ())
            calls = tuple(
                ToolCall(str(c.get("id")), str(c.get("name")), str(c.get("arguments")))
                for c in (raw_calls if isinstance(raw_calls, tuple | list) else ())
                if isinstance(c, Mapping)
            )
            reasoning = data.get("reasoning")
            messages.append(
                Message.assistant(
                    str(data.get("content", "")),
                    tool_calls=calls,
                    reasoning=reasoning if isinstance(reasoning, str) else None,
                )
            )
        elif event.type == "tool/result":
            messages.append(Message.tool(str(data.get("call_id")), str(data.get("content", ""))))
    return messages


def model_replies_since(events: Sequence[Event], start: int) -> int:
    """How many model replies this session produced itself (a fork seed's are not its own)."""
    return sum(1 for e in events[start:] if e.type == "assistant/message")
