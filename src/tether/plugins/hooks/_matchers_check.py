"""The load-time check that a tool matcher can fire at all.

A ``PreToolUse`` guard whose matcher names a tool tether does not have (Claude Code's ``Task``
or ``NotebookEdit``, a typo like ``bash|Rm``) never runs, and so fails open without a word.
It is not an error (a settings file shared with Claude Code legitimately names Claude-only
tools), so the plugin reports it as a warning when it loads.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from tether.kernel._printable import printable
from tether.plugins.hooks._payload import CLAUDE_TOOL_NAMES
from tether.plugins.hooks._settings import HookEvent, HookHandler

log = logging.getLogger(__name__)

_TOOL_EVENTS = frozenset({HookEvent.PRE_TOOL_USE, HookEvent.POST_TOOL_USE})
_DYNAMIC_PREFIX = "mcp__"
"""MCP tools appear when their server connects, after the load: not judged here."""


def unknown_tool_matchers(handlers: Sequence[HookHandler], registered: Iterable[str]) -> list[str]:
    """One warning per matcher group whose tool matcher matches no known tool name (both
    names of each tether tool, and every tool registered so far)."""
    known = {*CLAUDE_TOOL_NAMES, *CLAUDE_TOOL_NAMES.values(), *registered}
    warnings: list[str] = []
    seen: set[str] = set()
    for handler in handlers:
        pattern = handler.matcher.pattern
        group = handler.handler_id.rsplit(".hooks[", 1)[0]
        if (
            handler.event not in _TOOL_EVENTS
            or pattern is None
            or handler.matcher.matches_all
            or _DYNAMIC_PREFIX in pattern
            or group in seen
            or any(map(handler.matcher.matches, known))
        ):
            continue
        seen.add(group)
        warnings.append(
            f"hooks: {printable(group)}: matcher {printable(repr(pattern))} matches no tool "
            f"tether has ({', '.join(sorted(known))}); its hooks never run"
        )
    return warnings


def report_unknown_tool_matchers(
    handlers: Sequence[HookHandler], registered: Iterable[str]
) -> list[str]:
    """:func:`unknown_tool_matchers`, each logged as a warning (stderr, for the CLI)."""
    warnings = unknown_tool_matchers(handlers, registered)
    for warning in warnings:
        log.warning("%s", warning)
    return warnings


__all__ = ["report_unknown_tool_matchers", "unknown_tool_matchers"]
