"""The Claude Code reply protocol: what a finished command said, and how replies merge.

Exit status first (``docs/hooks.md``, "Reply protocol"):

- ``2`` blocks, with stderr as the reason (stdout is ignored, as in Claude Code);
- any other non-zero status is a non-blocking error: reported, and the run continues;
- ``0``: stdout that starts with ``{`` must be a JSON object of the documented shape; other
  text is context for ``UserPromptSubmit``/``SessionStart`` and ignored elsewhere.

In a JSON reply ``hookSpecificOutput.permissionDecision`` (``allow``/``deny``/``ask``) overrides
the legacy top-level ``decision`` (``approve``/``block``). A reply that starts like JSON but does
not parse, or has a field of the wrong type or an unknown decision word, is ``invalid-output``:
reported, and treated as no decision; it can never turn into an allow. ``continue: false`` is
parsed and reported but, as in the reference, no bridge acts on it; ``updatedInput`` is parsed,
logged and ignored (arguments are already logged and presented; input rewriting is not
supported, §4.1).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal, TypeVar

from tether.kernel._printable import printable
from tether.plugins.hooks._runner import CommandRun
from tether.plugins.hooks._settings import HookEvent

log = logging.getLogger(__name__)
T = TypeVar("T")

HookDecision = Literal[
    "allow", "deny", "ask", "block", "none", "error", "timeout", "invalid-output", "cancelled"
]
"""What one hook run amounted to (the ``decision`` of ``hook/result``).

- ``allow`` / ``deny`` / ``ask``: a PreToolUse permission decision (the legacy ``block`` is
  ``deny`` there; legacy ``approve`` is ``allow``).
- ``block``: exit 2 (on PreToolUse too, where it denies the call), or ``decision: "block"``
  on any other event.
- ``none``: exit 0 without a decision (plain output, context only, or nothing).
- ``error``: a non-zero exit other than 2, or the command could not start.
- ``timeout``: killed after its timeout.
- ``invalid-output``: stdout looked like JSON but was not a valid reply.
- ``cancelled``: the call it gated was cancelled and the command was killed.
"""

FAILED: Final = frozenset({"error", "timeout", "invalid-output"})
"""Decisions that mean the hook did not work (``fail_closed`` turns these into a deny)."""

_PLAIN_TEXT_CONTEXT: Final = frozenset({HookEvent.USER_PROMPT_SUBMIT, HookEvent.SESSION_START})
_PERMISSION: Final[Mapping[str, HookDecision]] = {"allow": "allow", "deny": "deny", "ask": "ask"}
STDERR_SUMMARY_CHARS: Final = 500


class InvalidReply(Exception):
    """A reply that starts like JSON but is not a valid one (the message says why)."""


@dataclass(frozen=True, slots=True)
class HookReply:
    decision: HookDecision
    reason: str | None = None
    contexts: tuple[str, ...] = ()
    halt: bool = False
    """``continue: false`` was given (reported, not acted on)."""
    problem: str | None = None
    """Why the reply is ``error``/``invalid-output``/``timeout`` (for logs and fail-closed)."""


def interpret(event: HookEvent, run: CommandRun) -> HookReply:
    """Turn one finished command into a :class:`HookReply` for ``event``."""
    failed = unfinished(run)
    if failed is not None:
        return failed
    code = run.exit_code
    if code == 2:
        return HookReply("block", run.stderr.strip() or f"blocked by a {event.value} hook")
    if code != 0:
        return HookReply("error", problem=f"the command exited with status {code}")
    text = run.stdout.strip()
    if not text:
        return HookReply("none")
    if not text.startswith("{"):
        return plain_text(event, text)
    try:
        return _parse_json_reply(event, text)
    except InvalidReply as err:
        return HookReply("invalid-output", problem=str(err))


def unfinished(run: CommandRun) -> HookReply | None:
    """The reply of a command that did not exit by itself (both dialects), else ``None``."""
    if run.status == "spawn-failed":
        return HookReply("error", problem=run.error or "the command could not start")
    if run.status == "timeout":
        return HookReply("timeout", problem="the command timed out")
    if run.status == "cancelled":
        return HookReply("cancelled")
    return None


def plain_text(event: HookEvent, text: str) -> HookReply:
    """Exit 0 with text that is not JSON: context where the event takes it (both dialects)."""
    return HookReply("none", contexts=(text,) if event in _PLAIN_TEXT_CONTEXT else ())


def reply_object(text: str) -> dict[str, object]:
    """``text`` (stdout) as the JSON object of a reply; :class:`InvalidReply` otherwise."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as err:
        raise InvalidReply(f"stdout is not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise InvalidReply("stdout JSON must be an object")
    return data


def _parse_json_reply(event: HookEvent, text: str) -> HookReply:
    data = reply_object(text)
    halt = optional_field(data, "continue", bool) is False
    optional_field(data, "stopReason", str)
    optional_field(data, "suppressOutput", bool)
    optional_field(data, "systemMessage", str)
    legacy = optional_field(data, "decision", str)
    reason = optional_field(data, "reason", str)
    specific = optional_field(data, "hookSpecificOutput", dict)
    contexts: tuple[str, ...] = ()
    permission: str | None = None
    permission_reason: str | None = None
    if specific is not None:
        named = optional_field(specific, "hookEventName", str)
        if named is not None and named != event.value:
            raise InvalidReply(
                f"hookSpecificOutput.hookEventName is {named!r}, not {event.value!r}"
            )
        context = optional_field(specific, "additionalContext", str)
        contexts = (context,) if context else ()
        if event is HookEvent.PRE_TOOL_USE:
            permission = optional_field(specific, "permissionDecision", str)
            permission_reason = optional_field(specific, "permissionDecisionReason", str)
            updated = optional_field(specific, "updatedInput", dict)
            if updated is not None:
                log.info(
                    "PreToolUse hook returned updatedInput (ignored): %s", printable(str(updated))
                )
    decision: HookDecision = "none"
    if legacy is not None and legacy not in ("approve", "block"):
        raise InvalidReply(f"decision must be 'approve' or 'block', got {legacy!r}")
    if event is HookEvent.PRE_TOOL_USE:
        if permission is not None:
            if permission not in _PERMISSION:
                raise InvalidReply(
                    f"permissionDecision must be allow, deny or ask, got {permission!r}"
                )
            decision = _PERMISSION[permission]
            reason = permission_reason if permission_reason is not None else reason
        elif legacy is not None:
            decision = "allow" if legacy == "approve" else "deny"
    elif legacy == "block":
        decision = "block"
    if decision in ("deny", "block") and not reason:
        reason = f"blocked by a {event.value} hook"
    return HookReply(decision, reason or None, contexts, halt)


def optional_field(data: Mapping[str, object], key: str, kind: type[T]) -> T | None:
    """``data[key]`` when present and of ``kind``; ``None`` when absent or null."""
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise InvalidReply(f"{key} must be of type {_type_name(kind)}, got {type(value).__name__}")
    return value


def _type_name(kind: type[object]) -> str:
    return {str: "string", bool: "boolean", dict: "object"}.get(kind, kind.__name__)


# -- merging --------------------------------------------------------------------------------
_RANK: Final[Mapping[str, int]] = {"deny": 3, "block": 3, "ask": 2, "allow": 1}
MergedDecision = Literal["allow", "deny", "ask", "block", "none"]
"""A dispatch's decision: the strongest of its hooks' (failures and plain output are none)."""
_MERGED_KIND: Final[Mapping[str, MergedDecision]] = {
    "deny": "deny",
    "block": "block",
    "ask": "ask",
    "allow": "allow",
}


@dataclass(frozen=True, slots=True)
class MergedReply:
    """All hooks of one dispatch: the strongest decision, its reasons, every context."""

    decision: MergedDecision
    reason: str | None
    contexts: tuple[str, ...]


def merge(replies: Iterable[HookReply]) -> MergedReply:
    """deny (block) > ask > allow > none; reasons of the winning kind joined, contexts kept."""
    replies = list(replies)
    best = max((_RANK.get(r.decision, 0) for r in replies), default=0)
    contexts = tuple(c for r in replies for c in r.contexts)
    if best == 0:
        return MergedReply("none", None, contexts)
    winners = [r for r in replies if _RANK.get(r.decision, 0) == best]
    reasons = list(dict.fromkeys(r.reason for r in winners if r.reason))
    kind = _MERGED_KIND[winners[0].decision]
    return MergedReply(kind, "\n".join(reasons) or None, contexts)


def stderr_summary(stderr: str) -> str | None:
    text = stderr.strip()
    if not text:
        return None
    if len(text) > STDERR_SUMMARY_CHARS:
        return text[: STDERR_SUMMARY_CHARS - 1] + "…"
    return text


__all__ = [
    "FAILED",
    "HookDecision",
    "HookReply",
    "InvalidReply",
    "MergedDecision",
    "MergedReply",
    "interpret",
    "merge",
    "optional_field",
    "plain_text",
    "reply_object",
    "stderr_summary",
    "unfinished",
]
