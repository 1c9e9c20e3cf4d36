"""The line ``tether run`` (text output) prints on stderr as each tool call starts: which agent,
the tool, and the command or path it acts on, escaped on one line
(:func:`tether.kernel._printable.printable`), so a user sees which commands ran.

``tether: bash: ls -la`` for the root; a subagent's calls carry its short id
(``tether: [1a2b3c4d] read: src/app.py``). Calls without a command or path show their
arguments as ``key=value`` pairs, as the chat does.
"""

from __future__ import annotations

import json
from typing import Final

from tether.agent._events import ToolCalled
from tether.kernel._printable import printable
from tether.surfaces.cli.chat._render import args_summary, one_line

SUBJECT_KEYS: Final = ("command", "path", "pattern")
"""The argument a tool acts on, in the order looked for."""

SUBJECT_LIMIT: Final = 200
"""Characters of a command or path shown (the session log has all of it)."""


def tool_line(call: ToolCalled, agent: str | None) -> str:
    """``agent`` is ``None`` for the root, else the subagent's session id."""
    who = "" if agent is None else f"[{agent[:8]}] "
    subject = _subject(call.arguments)
    shown = (
        one_line(subject, SUBJECT_LIMIT) if subject is not None else args_summary(call.arguments)
    )
    head = f"tether: {who}{printable(call.name)}"
    return f"{head}: {shown}" if shown else head


def _subject(arguments: str) -> str | None:
    try:
        value = json.loads(arguments or "{}")
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    for key in SUBJECT_KEYS:
        if isinstance(value.get(key), str):
            return str(value[key])
    return None
