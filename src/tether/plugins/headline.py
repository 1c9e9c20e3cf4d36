"""The one-line question a routed approval shows, built so a child cannot forge its fields.

A headline is tether's fields joined by `` · ``: ``run "bash" · Why: … · Command: …``. What a
child controls (its description or justification, its arguments) could imitate that
structure, so:

- a field a child wrote is shown as a JSON string literal (``Why: "…"``), cut at
  :data:`FIELD_LIMIT` characters, with ``·``, its look-alikes and every invisible character
  escaped (:mod:`tether.plugins.shown_text`); the value stays exact JSON;
- the command (or the path) comes last, in full: nothing after it can be taken for it. Only
  its invisible characters are escaped (a newline shows as ``\\n``, never as a line break or
  a space);
- a JSON argument summary gets the same escapes as a quoted field.

The answerer payload (``ApprovalRequest.action``, ``RoutedOrigin``, the ``--approver`` JSON)
keeps the exact values; only the headline is escaped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

from tether.plugins.shown_text import inert_json, quoted, shown_in_full
from tether.policy.escalation import JUSTIFICATION_ARGUMENT, PERMISSIONS_ARGUMENT
from tether.policy.modes import SandboxMode

SEPARATOR: Final = " · "
FIELD_LIMIT: Final = 200
"""Characters of a child-written field (and of a JSON argument summary) in a headline."""


def arguments_summary(arguments: Mapping[str, object]) -> str:
    """The arguments as one line of JSON, at most :data:`FIELD_LIMIT` characters (longer ones
    end with ``…``). Exact: this is what answerers get in ``RoutedOrigin``."""
    text = json.dumps(arguments, ensure_ascii=False, sort_keys=True, default=str)
    if len(text) > FIELD_LIMIT:
        text = text[: FIELD_LIMIT - 1] + "…"
    return text


def _why(value: object) -> list[str]:
    if isinstance(value, str) and value.strip():
        return [f"Why: {quoted(value, FIELD_LIMIT)}"]
    return []


def _last(action: Mapping[str, object], keys: tuple[str, ...]) -> list[str]:
    """The field that ends the headline: the first of ``keys`` with a value, in full."""
    for key in keys:
        value = action.get(key)
        if isinstance(value, str) and value.strip():
            return [f"{key.capitalize()}: {shown_in_full(value)}"]
    return []


def headline(tool: str, arguments: Mapping[str, object], *, subagent: bool = True) -> str:
    """``Subagent approval: run "bash" · Why: "…" · Command: …`` on one line;
    ``Arguments: {…}`` when the call has neither a why nor a command. Without ``subagent`` the
    ``Subagent approval: `` lead-in is left out."""
    why = _why(arguments.get("description") or arguments.get("justification"))
    parts = [f'run "{shown_in_full(tool)}"', *why, *_last(arguments, ("command",))]
    if len(parts) == 1:
        parts.append(f"Arguments: {inert_json(arguments_summary(arguments))}")
    text = SEPARATOR.join(parts)
    return f"Subagent approval: {text}" if subagent else text


def escalation_headline(action: Mapping[str, object], reason: str | None) -> str:
    """``Subagent approval: escalate sandbox to MODE · Why: "…" · Command: …`` (or ``Path:``).

    Built from the structured action the escalation ladder passes; ``reason`` (the ladder's
    text, which embeds the justification) is shown quoted only when the action has none.
    """
    target = action.get(PERMISSIONS_ARGUMENT)
    modes = {mode.value for mode in SandboxMode}
    lead = f"escalate sandbox to {target}" if target in modes else "escalate sandbox"
    why = _why(action.get(JUSTIFICATION_ARGUMENT)) or _why(reason)
    return "Subagent approval: " + SEPARATOR.join([lead, *why, *_last(action, ("command", "path"))])


__all__ = [
    "FIELD_LIMIT",
    "SEPARATOR",
    "arguments_summary",
    "escalation_headline",
    "headline",
]
