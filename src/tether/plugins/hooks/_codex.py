"""The Codex hook dialect: Codex's hook files and the way Codex reads a hook's reply.

Codex configures hooks with the same shape as Claude Code (event -> matcher groups ->
``{type: "command", command, timeout}`` handlers), in ``._codex/hooks.json`` (``{"hooks":
{...}}``) or in the ``[hooks]`` table of ``._codex/config.toml``. Its stdin payload has Claude
Code's fields plus ``turn_id``, ``permission_mode`` (and ``model`` when known), and for
``Stop`` ``last_assistant_message``. The runner, the sandbox confinement, the merge and the
fail-closed rules are the Claude Code dialect's; only :func:`interpret_codex` differs, where
Codex is stricter:

- exit 2 blocks only with a reason on stderr; without one it is an ``error``;
- ``decision: "block"`` and ``permissionDecision: "deny"`` need a non-empty reason, and a
  ``reason`` or ``permissionDecisionReason`` without a decision is invalid;
- on ``PreToolUse``, ``continue: false``, ``stopReason`` and ``suppressOutput`` are invalid,
  as is ``updatedInput`` without ``permissionDecision: "allow"``;
- ``continue: false`` stops: on ``UserPromptSubmit`` it rejects the prompt (with
  ``stopReason``) like a block; on ``Stop`` it ends for good, no continuation even if another
  field asks for one;
- ``decision: "approve"`` exists only on ``PreToolUse``.

Codex rejects ``permissionDecision: "ask"`` (and a bare ``allow``/``approve``) as unsupported
and then runs the call. tether reads them instead, because it can do so without widening
anything: ``ask`` goes to the approval service, ``allow`` is advisory as in the Claude Code
dialect (``docs/decisions/0047-hooks-in-both-dialects.md``).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from typing import Final

from tether.plugins.hooks._protocol import (
    HookDecision,
    HookReply,
    InvalidReply,
    optional_field,
    plain_text,
    reply_object,
    unfinished,
)
from tether.plugins.hooks._runner import CommandRun
from tether.plugins.hooks._settings import (
    CODEX,
    HookEvent,
    HookHandler,
    HookSettingsError,
    json_object,
    parse_hooks_block,
)

PERMISSION_MODE: Final = "default"
"""Codex's ``permission_mode`` for every tether call: tether has no Codex permission modes;
its sandbox and approval policy decide, as Codex's default mode does."""


def parse_codex_file(data: bytes | None, source: str) -> list[HookHandler]:
    """The handlers of one Codex hook file (``hooks.json``, or a ``config.toml`` with a
    ``[hooks]`` table); ``[]`` when absent. Events tether does not bridge and unknown keys
    are ignored, as in Claude Code settings files."""
    if data is None:
        return []
    if source.endswith(".toml"):
        try:
            parsed: Mapping[str, object] = tomllib.loads(data.decode("utf-8"))
        except UnicodeDecodeError as err:
            raise HookSettingsError(f"{source}: cannot read: not UTF-8 ({err})") from err
        except tomllib.TOMLDecodeError as err:
            raise HookSettingsError(f"{source}: not valid TOML: {err}") from err
        except RecursionError:
            raise HookSettingsError(f"{source}: not valid TOML: nested too deeply") from None
    else:
        parsed = json_object(data, source)
    return parse_hooks_block(parsed.get("hooks"), source, strict=False, dialect=CODEX)


def interpret_codex(event: HookEvent, run: CommandRun) -> HookReply:
    """Turn one finished command into a :class:`HookReply` the way Codex reads it."""
    failed = unfinished(run)
    if failed is not None:
        return failed
    code = run.exit_code
    if code == 2:
        reason = run.stderr.strip()
        if not reason:
            return HookReply(
                "error",
                problem=f"{event.value} hook exited with code 2 but wrote no reason to stderr",
            )
        return HookReply("block", reason)
    if code != 0:
        return HookReply("error", problem=f"the command exited with status {code}")
    text = run.stdout.strip()
    if not text:
        return HookReply("none")
    if not text.startswith(("{", "[")):
        return plain_text(event, text)
    try:
        return _json_reply(event, reply_object(text))
    except InvalidReply as err:
        return HookReply("invalid-output", problem=str(err))


def _json_reply(event: HookEvent, data: Mapping[str, object]) -> HookReply:
    proceed = optional_field(data, "continue", bool) is not False
    stop_reason = optional_field(data, "stopReason", str)
    suppress = optional_field(data, "suppressOutput", bool) is True
    optional_field(data, "systemMessage", str)
    decision = optional_field(data, "decision", str)
    reason = _trimmed(optional_field(data, "reason", str))
    specific = optional_field(data, "hookSpecificOutput", dict) or {}
    named = optional_field(specific, "hookEventName", str)
    if named is not None and named != event.value:
        raise InvalidReply(f"hookSpecificOutput.hookEventName is {named!r}, not {event.value!r}")
    context = optional_field(specific, "additionalContext", str)
    contexts = (context,) if context else ()
    if decision not in (None, "approve", "block"):
        raise InvalidReply(f"decision must be 'approve' or 'block', got {decision!r}")
    if event is HookEvent.PRE_TOOL_USE:
        if not proceed or stop_reason is not None or suppress:
            raise InvalidReply(
                "PreToolUse hook returned unsupported continue:false, stopReason or suppressOutput"
            )
        kind, why = _pre_tool_use(specific, decision, reason)
        return HookReply(kind, why, contexts)
    if decision == "approve":
        raise InvalidReply(f"{event.value} hook returned decision:approve (PreToolUse only)")
    if not proceed:
        # Codex: continue:false stops the prompt, and on Stop wins over a block.
        if event is HookEvent.USER_PROMPT_SUBMIT:
            why = _trimmed(stop_reason) or "stopped by a UserPromptSubmit hook"
            return HookReply("block", why, contexts, halt=True)
        return HookReply("none", None, contexts, halt=True)
    if decision == "block":
        if reason is None:
            raise InvalidReply(f"{event.value} hook returned decision:block without a reason")
        return HookReply("block", reason, contexts)
    if reason is not None and event is HookEvent.POST_TOOL_USE:
        raise InvalidReply("PostToolUse hook returned reason without decision")
    return HookReply("none", None, contexts)


def _pre_tool_use(
    specific: Mapping[str, object], decision: str | None, reason: str | None
) -> tuple[HookDecision, str | None]:
    permission = optional_field(specific, "permissionDecision", str)
    why = _trimmed(optional_field(specific, "permissionDecisionReason", str))
    updated = optional_field(specific, "updatedInput", dict)
    if permission is None and why is None and updated is None:
        if decision == "block":
            if reason is None:
                raise InvalidReply("PreToolUse hook returned decision:block without a reason")
            return "deny", reason
        if decision is None and reason is not None:
            raise InvalidReply("PreToolUse hook returned reason without decision")
        return ("allow" if decision == "approve" else "none"), None
    if updated is not None and permission != "allow":
        raise InvalidReply("PreToolUse hook returned updatedInput without permissionDecision:allow")
    if permission == "deny":
        if why is None:
            raise InvalidReply(
                "PreToolUse hook returned permissionDecision:deny without a "
                "permissionDecisionReason"
            )
        return "deny", why
    if permission == "ask":
        return "ask", why
    if permission == "allow":
        return "allow", None
    if permission is None:
        raise InvalidReply(
            "PreToolUse hook returned permissionDecisionReason without permissionDecision"
        )
    raise InvalidReply(f"permissionDecision must be allow, deny or ask, got {permission!r}")


def _trimmed(text: str | None) -> str | None:
    return text.strip() or None if text is not None else None


__all__ = ["PERMISSION_MODE", "interpret_codex", "parse_codex_file"]
