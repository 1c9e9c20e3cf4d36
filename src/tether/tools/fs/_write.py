"""``write``: create or replace a whole file, inside the fence."""

from __future__ import annotations

from pydantic import Field

from tether.policy._escalation import EffectNoun
from tether.sandbox import PathRules
from tether.tools._base import ToolArgs, ToolCall, ToolResult
from tether.tools.fs._common import args_of, call_rules, encode_text, plural, run_blocking
from tether.tools.fs._fence import FencePolicy, open_parent, plan_write, replace_file, shown_name


class WriteArgs(ToolArgs):
    # No escalation fields here: the pipeline adds the pair to the schema of every tool with
    # an ``escalation_noun`` (tether.policy._escalation) and takes it off before validation.
    path: str = Field(
        min_length=1, description="File to write; relative paths are under the workspace."
    )
    content: str = Field(description="The complete new content of the file.")


class WriteTool:
    name: str = "write"
    escalation_noun: EffectNoun = "operation"
    description: str = (
        "Write a file with the given content, replacing it if it exists and creating missing "
        "parent directories. The write is atomic. Relative paths are under the workspace; the "
        "sandbox mode decides where writes are allowed."
    )
    Args: type[ToolArgs] = WriteArgs

    async def run(self, call: ToolCall) -> ToolResult:
        args = args_of(call, WriteArgs)
        policy = call.policy
        return await run_blocking(
            args.path,
            lambda: write_file(policy, args.path, args.content, rules=call_rules(call)),
        )


def write_file(
    policy: FencePolicy | None,
    path: str,
    content: str,
    *,
    rules: PathRules,
    mode: str | None = None,
) -> ToolResult:
    """The blocking body of ``write`` (``mode``: a mode granted for this call only)."""
    plan = plan_write(policy, path, rules=rules, mode=mode)
    data = encode_text(content, "content")
    with open_parent(plan, create=True) as parent:
        created = replace_file(plan, parent, data)
    return ToolResult(
        f"Wrote {plural(len(data), 'byte')} to {path}",
        details={"path": shown_name(plan.target), "bytes": len(data), "created": created},
    )


__all__ = ["WriteArgs", "WriteTool", "write_file"]
