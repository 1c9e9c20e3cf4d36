"""Hook settings: the Claude Code ``hooks`` block, from ``tether.toml`` or settings files.

The shape is Claude Code's own, so a ``.claude/settings.json`` works unchanged::

    {"hooks": {"PreToolUse": [{"matcher": "Bash",
                               "hooks": [{"type": "command", "command": "...", "timeout": 10}]}]}}

Two sources, one parser:

- **inline** (the plugin's ``hooks`` config in ``tether.toml``) is tether's own configuration
  and is strict: an unknown event name or key is an error;
- **settings files** are shared with Claude Code, which grows new events and handler keys over
  time: events tether does not bridge (``Notification``, ``PreCompact``, ...) and unknown keys
  are ignored, so the same file serves both programs.

Both are strict about what tether *would* run: a supported event whose handler is not a
``command`` (Claude Code also has ``prompt``, ``http``, ...) fails the load, because silently
skipping a configured ``PreToolUse`` guard would widen what an agent may do.

A matcher counts only on the events that have one (:data:`MATCHED_EVENTS`); on the others
(``UserPromptSubmit``, ``Stop``) it is ignored, whatever it says, as Claude Code and Codex do.
Each handler keeps the :data:`Dialect` of the file it came from, which decides its stdin
payload and how its reply is read (Codex files: :mod:`tether.plugins.hooks._codex`).
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Literal

from tether.errors import TetherError
from tether.plugins.hooks._matcher import InvalidMatcherError, Matcher, compile_matcher

log = logging.getLogger(__name__)


class HookEvent(StrEnum):
    """The Claude Code hook events tether bridges."""

    PRE_TOOL_USE = "PreToolUse"
    """Before a tool call runs (``tools/pre-execute``): may allow, deny or ask."""
    POST_TOOL_USE = "PostToolUse"
    """After a tool call succeeded (``tools/post-execute``): may block the result, add context."""
    USER_PROMPT_SUBMIT = "UserPromptSubmit"
    """Before a user prompt opens its turn (``agent/pre-turn``): may reject it."""
    STOP = "Stop"
    """When a root agent's turn ended (``agent/turn-end``): may ask it to continue."""
    SUBAGENT_START = "SubagentStart"
    """When a subagent starts (``subagent/start``)."""
    SUBAGENT_STOP = "SubagentStop"
    """When a subagent finished (``subagent/end``)."""
    SESSION_START = "SessionStart"
    """When a root session is created or resumed (``sessions.on_created``)."""


MATCHED_EVENTS: Final = frozenset(
    {
        HookEvent.PRE_TOOL_USE,
        HookEvent.POST_TOOL_USE,
        HookEvent.SESSION_START,
        HookEvent.SUBAGENT_START,
        HookEvent.SUBAGENT_STOP,
    }
)
"""Events whose matcher applies (to the tool name, the session source, the agent type);
Claude Code and Codex ignore the matcher of the others."""

Dialect = Literal["claude-code", "codex"]
"""Whose hook protocol a handler speaks: Claude Code's (inline hooks, ``settings_files``) or
Codex's (``codex_files``). Recorded as ``dialect`` in ``hook/invoked``."""

CLAUDE_CODE: Final[Dialect] = "claude-code"
CODEX: Final[Dialect] = "codex"


class HookSettingsError(TetherError):
    """A hooks block or settings file that cannot be used; the message names where."""

    code = "HOOK_SETTINGS"


@dataclass(frozen=True, slots=True)
class HookHandler:
    """One configured command for one event."""

    event: HookEvent
    matcher: Matcher
    command: str
    timeout: float | None
    """Seconds; ``None`` uses the plugin's default."""
    handler_id: str
    """Stable, human-readable origin: ``<source>#<Event>[group].hooks[index]``."""
    dialect: Dialect = CLAUDE_CODE


def parse_hooks_block(
    raw: object, source: str, *, strict: bool, dialect: Dialect = CLAUDE_CODE
) -> list[HookHandler]:
    """Parse a ``hooks`` object (event -> matcher groups -> handlers; Claude Code and Codex
    share the shape). ``source`` names it in ids and errors."""
    if raw is None:
        return []
    if not isinstance(raw, Mapping):
        raise HookSettingsError(f"{source}: hooks must be an object of event -> list of groups")
    handlers: list[HookHandler] = []
    for event_name, groups in raw.items():
        try:
            event = HookEvent(event_name)
        except ValueError:
            if strict:
                known = ", ".join(e.value for e in HookEvent)
                raise HookSettingsError(
                    f"{source}: unknown hook event {event_name!r} (supported: {known})"
                ) from None
            log.info("%s: hook event %r is not bridged by tether; ignored", source, event_name)
            continue
        handlers.extend(_parse_groups(event, groups, source, strict=strict, dialect=dialect))
    return handlers


def _parse_groups(
    event: HookEvent, groups: object, source: str, *, strict: bool, dialect: Dialect
) -> list[HookHandler]:
    where = f"{source}: {event.value}"
    if not isinstance(groups, Sequence) or isinstance(groups, str):
        raise HookSettingsError(f"{where}: must be a list of matcher groups")
    handlers: list[HookHandler] = []
    for g, group in enumerate(groups):
        gwhere = f"{where}[{g}]"
        if not isinstance(group, Mapping):
            raise HookSettingsError(f"{gwhere}: a matcher group must be an object")
        _check_keys(group, {"matcher", "hooks"}, gwhere, strict)
        matcher = _group_matcher(event, group.get("matcher"), gwhere)
        items = group.get("hooks")
        if not isinstance(items, Sequence) or isinstance(items, str):
            raise HookSettingsError(f"{gwhere}.hooks: must be a list of hook handlers")
        for h, item in enumerate(items):
            hwhere = f"{gwhere}.hooks[{h}]"
            handler_id = f"{source}#{event.value}[{g}].hooks[{h}]"
            handlers.append(
                _parse_handler(event, matcher, item, hwhere, handler_id, strict, dialect)
            )
    return handlers


def _group_matcher(event: HookEvent, pattern: object, where: str) -> Matcher:
    if event not in MATCHED_EVENTS:
        if pattern not in (None, "", "*"):
            log.info("%s.matcher: %s has no matcher; %r ignored", where, event.value, pattern)
        return compile_matcher(None)
    if pattern is not None and not isinstance(pattern, str):
        raise HookSettingsError(f"{where}.matcher: must be a string")
    try:
        return compile_matcher(pattern)
    except InvalidMatcherError as err:
        raise HookSettingsError(f"{where}.matcher: {err}") from None


def _parse_handler(
    event: HookEvent,
    matcher: Matcher,
    item: object,
    where: str,
    handler_id: str,
    strict: bool,
    dialect: Dialect,
) -> HookHandler:
    if not isinstance(item, Mapping):
        raise HookSettingsError(f"{where}: a hook handler must be an object")
    _check_keys(item, {"type", "command", "timeout"}, where, strict)
    kind = item.get("type")
    if kind != "command":
        raise HookSettingsError(
            f'{where}: hook type {kind!r} is not supported (tether runs only type "command")'
        )
    command = item.get("command")
    if not isinstance(command, str) or not command.strip():
        raise HookSettingsError(f"{where}.command: must be a non-empty string")
    timeout = item.get("timeout")
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise HookSettingsError(f"{where}.timeout: must be a positive number of seconds")
    return HookHandler(
        event, matcher, command, None if timeout is None else float(timeout), handler_id, dialect
    )


def _check_keys(obj: Mapping[str, object], allowed: set[str], where: str, strict: bool) -> None:
    if strict:
        unknown = sorted(set(obj) - allowed)
        if unknown:
            raise HookSettingsError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}")


def settings_paths(files: Sequence[str], base_dir: str) -> list[str]:
    """The absolute path of each listed settings file (relative ones from ``base_dir``)."""
    return [path if os.path.isabs(path) else os.path.join(base_dir, path) for path in files]


def parse_settings_file(data: bytes | None, source: str) -> list[HookHandler]:
    """The handlers of one ``.claude/settings.json``-style file; ``[]`` when it is absent
    (``data`` is ``None``). ``source`` names it in handler ids and errors.

    A missing file is skipped (Claude Code reads whichever of its settings files exist, and
    ``settings.local.json`` is usually absent); a malformed one fails.
    """
    if data is None:
        log.info("hooks: settings file %s does not exist; skipped", source)
        return []
    return parse_hooks_block(json_object(data, source).get("hooks"), source, strict=False)


def json_object(data: bytes, source: str) -> Mapping[str, object]:
    """``data`` as a JSON object; :class:`HookSettingsError` naming ``source`` otherwise."""
    try:
        parsed = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise HookSettingsError(f"{source}: cannot read: not UTF-8 ({err})") from err
    except json.JSONDecodeError as err:
        raise HookSettingsError(f"{source}: not valid JSON: {err}") from err
    except RecursionError:
        raise HookSettingsError(f"{source}: not valid JSON: nested too deeply") from None
    if not isinstance(parsed, Mapping):
        raise HookSettingsError(f"{source}: a settings file must be a JSON object")
    return parsed


__all__ = [
    "CLAUDE_CODE",
    "CODEX",
    "MATCHED_EVENTS",
    "Dialect",
    "HookEvent",
    "HookHandler",
    "HookSettingsError",
    "json_object",
    "parse_hooks_block",
    "parse_settings_file",
    "settings_paths",
]
