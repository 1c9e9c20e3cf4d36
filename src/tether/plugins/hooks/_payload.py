"""What a hook reads on stdin: Claude Code's field names, and tether's tools in Claude Code's
clothes, so that existing hook scripts work unchanged.

Tool names and inputs:

========  =========  ==================================================================
tether    Claude     ``tool_input``
========  =========  ==================================================================
bash      ``Bash``   ``command``, ``timeout``?, ``description``?
write     ``Write``  ``file_path`` (absolute), ``content``
edit      ``Edit``   ``file_path`` (absolute), ``old_string``, ``new_string``, ``replace_all``?
read      ``Read``   ``file_path`` (absolute), ``offset``?, ``limit``?
ls        ``LS``     ``path`` (absolute)
glob      ``Glob``   ``pattern``, ``path``? (absolute)
grep      ``Grep``   ``pattern``, ``path``? (absolute), ``glob``?, ``-i``?
========  =========  ==================================================================

Every other argument a tether tool has is passed through under its own name (hook scripts
ignore fields they do not know). Unknown tools keep their name and arguments. Relative paths
are resolved against the call's workspace, because Claude Code's file tools always carry an
absolute ``file_path`` and scripts compare it against ``$CLAUDE_PROJECT_DIR``.

The input is what the model proposed (the raw arguments), not the validated model with its
defaults filled in: Claude Code shows hooks the model's own input too.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Final, TypeGuard

from tether.plugins.hooks._settings import HookEvent
from tether.session import JsonValue
from tether.tools._base import ToolCall, ToolResult

CLAUDE_TOOL_NAMES: Final[Mapping[str, str]] = {
    "bash": "Bash",
    "write": "Write",
    "edit": "Edit",
    "read": "Read",
    "ls": "LS",
    "glob": "Glob",
    "grep": "Grep",
}
"""tether tool name -> Claude Code tool name."""

_FILE_TOOLS: Final = frozenset({"Write", "Edit", "Read"})
_PATH_TOOLS: Final = frozenset({"LS", "Glob", "Grep"})
_RENAMES: Final[Mapping[str, Mapping[str, str]]] = {
    "Grep": {"ignore_case": "-i"},
    "Bash": {"timeout_ms": "timeout"},
}


def claude_tool_name(name: str) -> str:
    return CLAUDE_TOOL_NAMES.get(name, name)


def tool_names(name: str) -> tuple[str, ...]:
    """The names a matcher is tested against for tether tool ``name``: its Claude Code name,
    then tether's own (``("Bash", "bash")``), so hook scripts written for either fire."""
    claude = claude_tool_name(name)
    return (claude,) if claude == name else (claude, name)


def call_arguments(call: ToolCall) -> dict[str, JsonValue]:
    """The model's own arguments (raw JSON), falling back to the validated ones."""
    try:
        raw = json.loads(call.raw_arguments or "{}")
    except (ValueError, RecursionError):
        raw = None
    return dict(raw) if isinstance(raw, dict) else call.arguments()


def claude_tool_input(
    name: str, args: Mapping[str, JsonValue], workspace: str
) -> dict[str, JsonValue]:
    """``args`` of tether tool ``name`` as the input of its Claude Code counterpart."""
    cc = claude_tool_name(name)
    if cc == name and name not in CLAUDE_TOOL_NAMES:
        return dict(args)
    out: dict[str, JsonValue] = {}
    renames = _RENAMES.get(cc, {})
    for key, value in args.items():
        if key == "path" and cc in _FILE_TOOLS:
            out["file_path"] = _absolute(value, workspace)
        elif key == "path" and cc in _PATH_TOOLS:
            out["path"] = _absolute(value, workspace)
        elif key == "timeout_seconds" and cc == "Bash" and _is_number(value):
            out["timeout"] = int(value * 1000)  # Claude Code's Bash timeout is milliseconds
        else:
            out[renames.get(key, key)] = value
    if cc == "LS" and "path" not in out:
        out["path"] = workspace
    return out


def claude_tool_response(
    cc_name: str, tool_input: Mapping[str, JsonValue], result: ToolResult
) -> dict[str, JsonValue]:
    """``tool_response`` for PostToolUse: a common shape plus the fields scripts look for."""
    response: dict[str, JsonValue] = {
        "content": result.content,
        "is_error": result.is_error,
        "success": not result.is_error,
    }
    if cc_name in _FILE_TOOLS and isinstance(tool_input.get("file_path"), str):
        response["filePath"] = tool_input["file_path"]
    if cc_name == "Bash":
        response.update(stdout=result.content, stderr="", interrupted=False, isImage=False)
        exit_code = result.details.get("exit_code")
        if isinstance(exit_code, int):
            response["exit_code"] = exit_code
    return response


def base_payload(
    event: HookEvent, session_id: str | None, cwd: str, transcript_path: str | None
) -> dict[str, JsonValue]:
    """The fields every Claude Code hook input carries."""
    return {
        "session_id": session_id,
        "transcript_path": transcript_path,
        "cwd": cwd,
        "hook_event_name": event.value,
    }


def encode_payload(payload: Mapping[str, JsonValue]) -> bytes:
    """JSON plus the trailing newline Claude Code sends (``docs/hooks.md``, "What a hook reads
    on stdin")."""
    return (json.dumps(payload, ensure_ascii=False, default=str) + "\n").encode("utf-8")


def _absolute(value: JsonValue, workspace: str) -> JsonValue:
    if not isinstance(value, str) or not value:
        return value
    # Lexical normalisation, so a hook comparing against $CLAUDE_PROJECT_DIR sees where a
    # ``../x`` really points; no ``~`` expansion, because tether's tools do not expand it.
    return os.path.normpath(os.path.join(workspace, value))


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


__all__ = [
    "CLAUDE_TOOL_NAMES",
    "base_payload",
    "call_arguments",
    "claude_tool_input",
    "claude_tool_name",
    "claude_tool_response",
    "encode_payload",
    "tool_names",
]
