"""What a resumed chat shows of the conversation so far: each prompt the user typed and the
agent's final reply to it, one line each, the last :data:`SHOWN_EXCHANGES` of them.

Condensed on purpose: the whole log is in ``tether sessions show``; the replay is there so the
user sees where they left off, as ``claude --resume`` shows the conversation it reopens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from rich.text import Text

from tether.agent._events import AssistantMessage, UserMessage
from tether.agent._inbox import USER_SOURCE
from tether.session._events import Event
from tether.surfaces.cli.chat._render import one_line

SHOWN_EXCHANGES: Final = 10
LINE_LIMIT: Final = 200
"""Characters of a prompt or a reply on its line (the log has all of it)."""


def exchanges(events: Sequence[Event]) -> list[tuple[str, str | None]]:
    """``(prompt, last reply with text)`` for each prompt the user typed, in order."""
    found: list[tuple[str, str | None]] = []
    for event in events:
        if event.type == UserMessage.TYPE:
            message = UserMessage.parse(event.data)
            if message.source == USER_SOURCE:
                found.append((message.content, None))
        elif event.type == AssistantMessage.TYPE and found:
            reply = AssistantMessage.parse(event.data).content
            if reply.strip():
                found[-1] = (found[-1][0], reply)
    return found


def replay(events: Sequence[Event]) -> list[Text]:
    """The lines a resumed chat prints before its first prompt."""
    pairs = exchanges(events)
    if not pairs:
        return []
    lines = []
    hidden = len(pairs) - SHOWN_EXCHANGES
    if hidden > 0:
        lines.append(Text(f"… {hidden} earlier exchanges (tether sessions show)", style="dim"))
    for prompt, reply in pairs[-SHOWN_EXCHANGES:]:
        lines.append(Text(f"> {one_line(prompt, LINE_LIMIT)}", style="bold"))
        if reply is not None:
            lines.append(Text(one_line(reply, LINE_LIMIT)))
    return lines
