"""The one-line question a routed approval shows, built so a child cannot forge its fields.

A headline is tether's fields joined by `` · ``: ``run "bash" · Why: … · Command: …``. What a
child controls (its description or justification, its arguments) could imitate that
structure, so:

- a field a child wrote is shown as a JSON string literal (``Why: "…"``), cut at
  :data:`FIELD_LIMIT` characters, with ``·``, its look-alikes and every invisible character
  escaped (:mod:`tether.plugins._shown_text`); the value stays exact JSON;
- the command (or the path) comes last, in full: nothing after it can be taken for it. Only
  the characters a terminal would not show as themselves are escaped
  (:func:`tether.kernel._printable.printable`: a newline shows as ``\\n``, never as a line
  break or a space);
- a JSON argument summary gets the same escapes as a quoted field; a call with a path but no
  command (``write``, ``edit``) shows the summary of its other arguments, then ``Path: …``.

:func:`action_text` shows an :class:`~tether.policy._approval.AskedAction` the same way
(``escalate to MODE · Command: …``): the wait hint, ``tether approvals list`` and chat's
``/approvals`` end with it.

The answerer payload (``ApprovalRequest.action``, ``RoutedOrigin``, the ``--approver`` JSON)
keeps the exact values; only the headline is escaped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

from tether.kernel._printable import printable
from tether.plugins._shown_text import inert_json, quoted
from tether.policy._approval import AskedAction
from tether.policy._escalation import JUSTIFICATION_ARGUMENT, PERMISSIONS_ARGUMENT
from tether.policy._modes import SandboxMode

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


def _field(key: str, value: str) -> str:
    return f"{key.capitalize()}: {printable(value)}"


def _last(action: Mapping[str, object], keys: tuple[str, ...]) -> list[str]:
    """The field that ends the headline: the first of ``keys`` with a value, in full."""
    for key in keys:
        value = action.get(key)
        if isinstance(value, str) and value.strip():
            return [_field(key, value)]
    return []


def subject(action: AskedAction) -> str | None:
    """``Command: …`` or ``Path: …`` in full, escaped; ``None`` when the ask names neither."""
    if action.command is not None:
        return _field("command", action.command)
    if action.path is not None:
        return _field("path", action.path)
    return None


def action_text(action: AskedAction) -> str:
    """``escalate to MODE · Command: …`` (or ``Path: …``), the command or path last, in full
    and escaped; ``""`` for an ask that is neither an escalation nor names either."""
    parts = [f"escalate to {action.target_mode}"] if action.target_mode is not None else []
    what = subject(action)
    return SEPARATOR.join(parts if what is None else [*parts, what])


def headline(tool: str, arguments: Mapping[str, object], *, subagent: bool = True) -> str:
    """``Subagent approval: run "bash" · Why: "…" · Command: …`` on one line; a call with a
    path and no command ends ``Arguments: {…} · Path: …``; ``Arguments: {…}`` alone when the
    call has neither a why, a command nor a path. Without ``subagent`` the
    ``Subagent approval: `` lead-in is left out."""
    why = _why(arguments.get("description") or arguments.get("justification"))
    last = _last(arguments, ("command",))
    parts = [f'run "{printable(tool)}"', *why]
    if not last:
        last = _last(arguments, ("path",))
        rest = {key: value for key, value in arguments.items() if not last or key != "path"}
        if not why and rest:
            parts.append(f"Arguments: {inert_json(arguments_summary(rest))}")
    text = SEPARATOR.join([*parts, *last])
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
    "action_text",
    "arguments_summary",
    "escalation_headline",
    "headline",
    "subject",
]
