"""The rows of ``tether sessions list``: each stored session with what a user picks it by, its
first prompt, workspace, status and how many subagents it delegated to.

Reads through ``inspect`` only (never writes); newest first, as ``claude --resume`` lists.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from tether.agent._events import UserMessage
from tether.agent._inbox import USER_SOURCE
from tether.errors import TetherError
from tether.session._events import Event
from tether.session._header import SessionHeader
from tether.session.persistence._base import Persistence
from tether.subagents._lineage import status_of

UNREADABLE_LOG = "unreadable"
"""The status of a session whose header reads but whose log does not (``sessions fsck``)."""

PROMPT_PREVIEW = 60
"""Characters of the first prompt shown in the table (``--json`` carries all of it)."""


@dataclass(frozen=True, slots=True)
class SessionRow:
    header: SessionHeader
    first_prompt: str | None
    status: str
    children: int

    def to_dict(self) -> dict[str, object]:
        return {
            **self.header.to_dict(),
            "first_prompt": self.first_prompt,
            "status": self.status,
            "children": self.children,
        }


def first_prompt(events: Sequence[Event]) -> str | None:
    """The text of the first message the user typed (not a plugin's record, not a task)."""
    for event in events:
        if event.type == UserMessage.TYPE:
            message = UserMessage.parse(event.data)
            if message.source == USER_SOURCE or event.data.get("source") == "user":
                return message.content
    return None


def in_workspace(header: SessionHeader, workspace: str | None) -> bool:
    return workspace is None or (
        header.cwd is not None and os.path.realpath(header.cwd) == os.path.realpath(workspace)
    )


async def session_rows(
    persistence: Persistence, headers: Sequence[SessionHeader], *, workspace: str | None = None
) -> list[SessionRow]:
    """One row per header of ``workspace`` (all without it), newest first."""
    children = Counter(
        h.parent_session for h in headers if h.parent_session and h.delegation_depth > 0
    )
    rows = []
    for header in headers:
        if not in_workspace(header, workspace):
            continue
        try:
            stored = await persistence.inspect(header.id)
        except TetherError:
            rows.append(SessionRow(header, None, UNREADABLE_LOG, children[header.id]))
            continue  # its header is fine; fsck names what is wrong with the log
        # Status from the stored events, not the repaired view: a live session is not crashed.
        events = stored.events[: len(stored.events) - len(stored.repair.synthesized)]
        own = events[header.seed_length or 0 :]
        rows.append(SessionRow(header, first_prompt(own), status_of(own), children[header.id]))
    return sorted(rows, key=lambda r: (r.header.created_at, r.header.id), reverse=True)


def prompt_cell(text: str | None) -> str:
    if text is None:
        return "-"
    line = " ".join(text.split())
    return line if len(line) <= PROMPT_PREVIEW else line[: PROMPT_PREVIEW - 1] + "…"
