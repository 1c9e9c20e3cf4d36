"""``--output-format stream-json`` and ``json``: tether's committed events as the messages
Claude Code prints for ``claude -p --output-format stream-json`` / ``json``, so parsers written
for it read tether.

One JSON object per line: a ``system``/``init`` message first; then, for the root session, an
``assistant`` message per model reply (its text and ``tool_use`` blocks) and a ``user`` message
per tool result (a ``tool_result`` block); last a ``result`` message with ``subtype``,
``is_error``, ``duration_ms``, ``num_turns``, ``result``, ``usage`` and, when the model has a
price, ``total_cost_usd``. ``json`` prints only that result. Built on the same committed stream
as ``--json`` (``Harness.stream``), so nothing shown can be lost by a crash. Subagents' events
are not shown (their requests are in the result's usage and cost); ``--json`` has them all.
"""

from __future__ import annotations

import json
import uuid
from typing import Final, Literal

from tether._harness import RunResult, SessionEvent
from tether.agent._events import AssistantMessage, ToolResulted
from tether.model._types import FinishReason, ToolCall

OutputFormat = Literal["text", "json", "stream-json"]
OUTPUT_FORMATS: Final[tuple[OutputFormat, ...]] = ("text", "json", "stream-json")

STOP_REASONS: Final[dict[FinishReason, str]] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "error": "error",
}
"""An OpenAI-style finish reason as the Anthropic ``stop_reason`` Claude Code reports."""

RESULT_SUBTYPES: Final[dict[str, str]] = {
    "completed": "success",
    "max-steps": "error_max_turns",
    "max-turns": "error_max_turns",
}
"""A run's stop reason as the result ``subtype`` (anything else: ``error_during_execution``)."""

_NAMESPACE: Final = uuid.uuid5(uuid.NAMESPACE_URL, "tether:stream-json")


def message_uuid(session_id: str, seq: int) -> str:
    """A stable UUID per event, so a consumer can deduplicate lines across a retried read."""
    return str(uuid.uuid5(_NAMESPACE, f"{session_id}:{seq}"))


def init_message(
    session_id: str, *, cwd: str, model: str, tools: list[str], mode: str
) -> dict[str, object]:
    return {
        "type": "system",
        "subtype": "init",
        "session_id": session_id,
        "uuid": str(uuid.uuid5(_NAMESPACE, f"{session_id}:init")),
        "cwd": cwd,
        "model": model,
        "tools": tools,
        "mcp_servers": [],
        "permissionMode": "default",
        "apiKeySource": "none",
        "tether_sandbox": mode,
    }


def translate(item: SessionEvent, root_id: str, model: str) -> dict[str, object] | None:
    """The Claude Code message for one committed event of the root, or ``None``."""
    event = item.event
    if item.session_id != root_id:
        return None
    common = {
        "parent_tool_use_id": None,
        "session_id": root_id,
        "uuid": message_uuid(root_id, event.seq),
    }
    if event.type == AssistantMessage.TYPE:
        reply = AssistantMessage.parse(event.data)
        content: list[dict[str, object]] = []
        if reply.content:
            content.append({"type": "text", "text": reply.content})
        for call in reply.tool_calls:
            content.append(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": _input(call)}
            )
        return {
            "type": "assistant",
            "message": {
                "id": f"msg_{root_id}_{event.seq}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": content,
                "stop_reason": STOP_REASONS[reply.finish_reason],
                "stop_sequence": None,
                "usage": {
                    "input_tokens": reply.usage.prompt_tokens,
                    "output_tokens": reply.usage.completion_tokens,
                },
            },
            **common,
        }
    if event.type == ToolResulted.TYPE:
        result = ToolResulted.parse(event.data)
        block = {
            "type": "tool_result",
            "tool_use_id": result.call_id,
            "content": result.content,
            "is_error": result.is_error,
        }
        return {"type": "user", "message": {"role": "user", "content": [block]}, **common}
    return None


def result_message(result: RunResult, totals: dict[str, object]) -> dict[str, object]:
    ok = result.stop_reason == "completed"
    message: dict[str, object] = {
        "type": "result",
        "subtype": RESULT_SUBTYPES.get(result.stop_reason, "error_during_execution"),
        "is_error": not ok,
        **totals,
        "result": result.output or "",
        "session_id": result.session_id,
        "stop_reason": result.stop_reason,
        "uuid": str(uuid.uuid5(_NAMESPACE, f"{result.session_id}:result")),
    }
    if result.error:
        message["errors"] = [result.error]
    return message


def line(message: dict[str, object]) -> str:
    return json.dumps(message, ensure_ascii=False)


def _input(call: ToolCall) -> object:
    try:
        value = json.loads(call.arguments)
    except (ValueError, RecursionError):
        value = None
    # Arguments that are not a JSON object are shown as the model wrote them.
    return value if isinstance(value, dict) else {"_raw": call.arguments}
