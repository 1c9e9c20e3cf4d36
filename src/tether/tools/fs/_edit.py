"""``edit``: replace an exact string in a text file, inside the fence."""

from __future__ import annotations

import difflib
import os
from typing import Final

from pydantic import Field

from tether.policy._escalation import EffectNoun
from tether.sandbox import PathRules
from tether.tools._base import ToolArgs, ToolCall, ToolResult
from tether.tools.fs._common import (
    SNIFF_BYTES,
    args_of,
    call_rules,
    encode_text,
    plural,
    read_some,
    run_blocking,
)
from tether.tools.fs._fence import (
    FencePolicy,
    FileToolError,
    WritePlan,
    open_existing,
    open_parent,
    plan_write,
    replace_file,
    shown_name,
)

MAX_EDIT_BYTES: Final = 8 * 1024 * 1024
"""Larger files are refused: the whole file is held in memory and rewritten."""
MAX_DIFF_CHARS: Final = 16_000
DIFF_TRUNCATED: Final = "... (diff truncated)\n"


class EditArgs(ToolArgs):
    # Sandbox escalation fields will join here as for ``write`` (see write.WriteArgs).
    path: str = Field(
        min_length=1, description="File to edit; relative paths are under the workspace."
    )
    old_string: str = Field(
        min_length=1, description="Exact text to replace; it must occur exactly once."
    )
    new_string: str = Field(description="The replacement text.")
    replace_all: bool = Field(
        default=False, description="Replace every occurrence instead of exactly one."
    )


class EditTool:
    name: str = "edit"
    escalation_noun: EffectNoun = "operation"
    description: str = (
        "Replace an exact string in a text file. `old_string` must match the file's text "
        "exactly (whitespace included) and occur exactly once, unless `replace_all` is set. "
        "Relative paths are under the workspace; the sandbox mode decides where edits are "
        "allowed."
    )
    Args: type[ToolArgs] = EditArgs

    async def run(self, call: ToolCall) -> ToolResult:
        args = args_of(call, EditArgs)
        policy = call.policy
        return await run_blocking(
            args.path, lambda: edit_file(policy, args, rules=call_rules(call))
        )


def _read_text(plan: WritePlan, parent: int) -> str:
    fd = open_existing(plan, parent)
    with os.fdopen(fd, "rb") as f:
        data = read_some(f, MAX_EDIT_BYTES + 1, plan.display)
    if len(data) > MAX_EDIT_BYTES:
        raise FileToolError(
            f"{plan.display} is too large to edit (more than {MAX_EDIT_BYTES} bytes)"
        )
    if b"\0" in data[:SNIFF_BYTES]:
        raise FileToolError(f"{plan.display} is a binary file; edit changes text files only")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise FileToolError(
            f"{plan.display} is not valid UTF-8 text (byte {err.start}); edit refuses to rewrite it"
        ) from err


def unified_diff(before: str, after: str, display: str) -> str:
    """A unified diff of the change, capped at ``MAX_DIFF_CHARS``."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a/{display}",
        tofile=f"b/{display}",
    )
    out: list[str] = []
    size = 0
    for line in lines:
        if not line.endswith("\n"):
            line += "\n\\ No newline at end of file\n"
        if size + len(line) > MAX_DIFF_CHARS:
            out.append(DIFF_TRUNCATED)
            break
        out.append(line)
        size += len(line)
    return "".join(out)


def edit_file(
    policy: FencePolicy | None, args: EditArgs, *, rules: PathRules, mode: str | None = None
) -> ToolResult:
    """The blocking body of ``edit`` (``mode``: a mode granted for this call only)."""
    if args.old_string == args.new_string:
        raise FileToolError("old_string and new_string are identical; nothing to change")
    plan = plan_write(policy, args.path, rules=rules, mode=mode)
    with open_parent(plan, create=False) as parent:
        before = _read_text(plan, parent)
        count = before.count(args.old_string)
        if count == 0:
            raise FileToolError(f"old_string not found in {args.path}")
        if count > 1 and not args.replace_all:
            raise FileToolError(
                f"old_string occurs {count} times in {args.path}; add surrounding context to "
                "make it unique, or set replace_all to replace every occurrence"
            )
        after = before.replace(args.old_string, args.new_string, -1 if args.replace_all else 1)
        replace_file(plan, parent, encode_text(after, "new_string"))
    return ToolResult(
        f"Edited {args.path}: {plural(count, 'replacement')}",
        details={
            "path": shown_name(plan.target),
            "replacements": count,
            "diff": unified_diff(before, after, args.path),
        },
    )


__all__ = ["MAX_EDIT_BYTES", "EditArgs", "EditTool", "edit_file", "unified_diff"]
