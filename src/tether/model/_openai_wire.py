"""OpenAI chat-completions wire format: request bodies out, streamed chunks in."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, TypeAlias

from tether.kernel._printable import printable
from tether.model._types import (
    Completion,
    FinishReason,
    Message,
    ModelError,
    ModelRequest,
    ReasoningDelta,
    StreamDelta,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolSchema,
    Usage,
)
from tether.session import JsonValue

_FINISH_REASONS: Mapping[str, FinishReason] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
}


def map_finish_reason(raw: str) -> FinishReason:
    """Provider finish reasons onto ours; anything unknown (``content_filter``, DeepSeek's
    ``insufficient_system_resource``) becomes ``error``."""
    return _FINISH_REASONS.get(raw, "error")


ToolCallContent: TypeAlias = Literal["empty", "null", "omit"]
"""What an assistant message that carries tool calls but no text sends as ``content``: ``""``
(the default: OpenAI, DeepSeek and llama.cpp accept it, and llama-cpp-python rejects
``null``), ``null``, or no ``content`` key at all, for servers that reject an empty string."""

Thinking: TypeAlias = Literal["enabled", "disabled"]
"""DeepSeek's ``thinking`` switch, sent as ``{"thinking": {"type": ...}}``."""

NO_STREAM_HINT: Final = (
    "if this server cannot stream (some cannot when tools are offered), set stream = false "
    "for this model in the configuration or pass --no-stream"
)


@dataclass(frozen=True, slots=True)
class WireOptions:
    """The per-model switches of the request body (``docs/models.md``, "Compatibility")."""

    stream: bool = True
    tool_call_content: ToolCallContent = "empty"
    send_reasoning: bool = True
    """Send recorded reasoning back as ``reasoning_content`` where DeepSeek's thinking mode
    requires it; off for a server that rejects the field."""
    thinking: Thinking | None = None
    reasoning_effort: str | None = None

    @property
    def echoes_reasoning(self) -> bool:
        return self.send_reasoning and self.thinking != "disabled"


def serialize_message(
    message: Message, options: WireOptions = WireOptions(), *, current_turn: bool = False
) -> dict[str, JsonValue]:
    """One message on the wire. ``current_turn``: it comes after the last user message."""
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    out: dict[str, JsonValue] = {"role": message.role}
    if message.role == "assistant" and message.tool_calls:
        if message.content:
            out["content"] = message.content
        elif options.tool_call_content == "empty":
            out["content"] = ""
        elif options.tool_call_content == "null":
            out["content"] = None
        # DeepSeek's thinking mode answers HTTP 400 unless every assistant message with tool
        # calls carries its reasoning_content (an empty one too), in every later request.
        if message.reasoning is not None and options.echoes_reasoning:
            out["reasoning_content"] = message.reasoning
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in message.tool_calls
        ]
    else:
        out["content"] = message.content
        # Without tool calls DeepSeek ignores reasoning from earlier user turns: only the
        # current turn's is sent.
        if (
            message.role == "assistant"
            and current_turn
            and message.reasoning is not None
            and options.echoes_reasoning
        ):
            out["reasoning_content"] = message.reasoning
    if message.name is not None:
        out["name"] = message.name
    return out


def serialize_messages(
    messages: Sequence[Message], options: WireOptions = WireOptions()
) -> list[dict[str, JsonValue]]:
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    return [
        serialize_message(m, options, current_turn=i > last_user) for i, m in enumerate(messages)
    ]


def serialize_tool(tool: ToolSchema) -> dict[str, JsonValue]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": dict(tool.parameters),
        },
    }


def build_body(
    model: str,
    request: ModelRequest,
    extra_body: Mapping[str, JsonValue] | None = None,
    options: WireOptions = WireOptions(),
) -> dict[str, JsonValue]:
    body: dict[str, JsonValue] = {
        "model": model,
        "messages": serialize_messages(request.messages, options),
        "stream": options.stream,
    }
    if options.stream:
        body["stream_options"] = {"include_usage": True}
    if request.tools:
        body["tools"] = [serialize_tool(t) for t in request.tools]
        body["tool_choice"] = "auto"
    if options.thinking is not None:
        body["thinking"] = {"type": options.thinking}
    if options.reasoning_effort is not None:
        body["reasoning_effort"] = options.reasoning_effort
    for key, value in (extra_body or {}).items():
        if value is None:
            body.pop(key, None)
        else:
            body[key] = value
    return body


@dataclass
class _PartialCall:
    id: str | None = None
    name: str | None = None
    arguments: list[str] = field(default_factory=list)


class StreamAssembler:
    """Turns decoded chunk objects into deltas and, at the end, one :class:`Completion`.

    ``source`` names the server in error messages; ``streaming`` says the request streamed
    (then a failure after HTTP 200 suggests turning streaming off).
    """

    def __init__(self, source: str, *, streaming: bool = True) -> None:
        self._source = source
        self._streaming = streaming
        self._text: list[str] = []
        self._reasoning: list[str] | None = None
        self._calls: dict[int, _PartialCall] = {}
        self._last_index: int | None = None
        self._usage: Usage | None = None
        self.finish_reason: str | None = None

    def feed(self, chunk: object) -> list[StreamDelta]:
        if not isinstance(chunk, dict):
            raise self._bad(f"expected a JSON object per chunk, got {_brief(chunk)}")
        error = chunk.get("error")
        if error is not None:
            raise self.failed_mid_stream(_error_text(error))
        usage = chunk.get("usage")
        if usage is not None:
            self._usage = self._parse_usage(usage)
        choices = chunk.get("choices")
        if choices is None:
            return []
        if not isinstance(choices, list):
            raise self._bad(f"'choices' is not a list in chunk {_brief(chunk)}")
        deltas: list[StreamDelta] = []
        for choice in choices:
            if not isinstance(choice, dict):
                raise self._bad(f"a choice is not an object in chunk {_brief(chunk)}")
            if choice.get("index", 0) != 0:
                continue  # we never ask for n > 1
            delta = choice.get("delta")
            if delta is None:
                delta = choice.get("message")  # non-streamed bodies carry a whole message
            if delta is not None:
                deltas.extend(self._feed_delta(delta, chunk))
            reason = choice.get("finish_reason")
            if reason is not None:
                if not isinstance(reason, str):
                    raise self._bad(f"finish_reason is not a string in chunk {_brief(chunk)}")
                self.finish_reason = reason
        return deltas

    def _feed_delta(self, delta: object, chunk: object) -> list[StreamDelta]:
        if not isinstance(delta, dict):
            raise self._bad(f"'delta' is not an object in chunk {_brief(chunk)}")
        out: list[StreamDelta] = []
        # vLLM and OpenRouter name the field "reasoning"; DeepSeek names it "reasoning_content".
        # An empty string still counts: DeepSeek wants an empty reasoning_content back.
        for key in ("reasoning_content", "reasoning"):
            piece = delta.get(key)
            if isinstance(piece, str):
                if self._reasoning is None:
                    self._reasoning = []
                if piece:
                    self._reasoning.append(piece)
                    out.append(ReasoningDelta(piece))
                break
        content = delta.get("content")
        if content is not None and not isinstance(content, str):
            raise self._bad(f"'content' is not a string in chunk {_brief(chunk)}")
        if content:
            self._text.append(content)
            out.append(TextDelta(content))
        calls = delta.get("tool_calls")
        if calls is not None:
            if not isinstance(calls, list):
                raise self._bad(f"'tool_calls' is not a list in chunk {_brief(chunk)}")
            for call in calls:
                piece = self._feed_call(call, chunk)
                if piece.id or piece.name or piece.arguments_delta:
                    out.append(piece)
        return out

    def _feed_call(self, call: object, chunk: object) -> ToolCallDelta:
        if not isinstance(call, dict):
            raise self._bad(f"a tool call is not an object in chunk {_brief(chunk)}")
        fn = call.get("function") or {}
        if not isinstance(fn, dict):
            raise self._bad(f"'function' is not an object in chunk {_brief(chunk)}")
        call_id = call.get("id") or None
        name = fn.get("name") or None
        arguments = fn.get("arguments") or ""
        if isinstance(arguments, dict):
            # A few servers send parsed arguments in non-streamed bodies.
            arguments = json.dumps(arguments, ensure_ascii=False)
        if not all(isinstance(v, str | None) for v in (call_id, name)) or not isinstance(
            arguments, str
        ):
            raise self._bad(f"tool call fields are not strings in chunk {_brief(chunk)}")
        index = call.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            index = self._infer_index(call_id, name)
        partial = self._calls.setdefault(index, _PartialCall())
        self._last_index = index
        # Some servers repeat id and name on every delta: keep the first, never concatenate.
        if call_id and not partial.id:
            partial.id = call_id
        if name and not partial.name:
            partial.name = name
        if arguments:
            partial.arguments.append(arguments)
        return ToolCallDelta(index=index, id=call_id, name=name, arguments_delta=arguments)

    def _infer_index(self, call_id: str | None, name: str | None) -> int:
        # Some servers omit the index: a new id, or a different name, starts a new call;
        # anything else continues the last one.
        if self._last_index is None:
            return 0
        last = self._calls[self._last_index]
        known_ids = {c.id for c in self._calls.values()}
        if (call_id is not None and call_id not in known_ids) or (
            name is not None and last.name is not None and name != last.name
        ):
            return max(self._calls) + 1
        return self._last_index

    def _parse_usage(self, usage: object) -> Usage:
        if not isinstance(usage, dict):
            raise self._bad(f"'usage' is not an object: {_brief(usage)}")
        prompt = usage.get("prompt_tokens") or 0
        completion = usage.get("completion_tokens") or 0
        if not isinstance(prompt, int) or not isinstance(completion, int):
            raise self._bad(f"usage token counts are not integers: {_brief(usage)}")
        return Usage(prompt_tokens=prompt, completion_tokens=completion)

    def finish(self) -> Completion:
        if self.finish_reason is None:
            hint = f"; {NO_STREAM_HINT}" if self._streaming else ""
            raise self._bad(f"the response ended before a finish_reason (truncated){hint}")
        tool_calls: list[ToolCall] = []
        for index in sorted(self._calls):
            partial = self._calls[index]
            if not partial.name:
                raise self._bad(
                    f"tool call #{index} (id {partial.id!r}) has no function name; "
                    f"arguments were {''.join(partial.arguments)[:200]!r}"
                )
            tool_calls.append(
                ToolCall(
                    id=partial.id or f"call_{index}",
                    name=partial.name,
                    arguments="".join(partial.arguments),
                )
            )
        reason = map_finish_reason(self.finish_reason)
        if tool_calls and reason == "stop":
            # Ollama and some vLLM versions say "stop" even when they asked for tools.
            reason = "tool_calls"
        return Completion(
            text="".join(self._text),
            reasoning="".join(self._reasoning) if self._reasoning is not None else None,
            tool_calls=tuple(tool_calls),
            usage=self._usage or Usage(),
            finish_reason=reason,
        )

    def failed_mid_stream(self, detail: str) -> ModelError:
        """The server said why it stopped after HTTP 200 (an error object or event)."""
        hint = f"; {NO_STREAM_HINT}" if self._streaming else ""
        return self._bad(f"the server failed after answering HTTP 200: {_clean(detail)}{hint}")

    def _bad(self, what: str) -> ModelError:
        return ModelError(f"bad response from {self._source}: {what}", code="MODEL_BAD_RESPONSE")


def _brief(value: object, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def _error_text(error: object) -> str:
    if isinstance(error, dict):
        message = error.get("message")
        if isinstance(message, str):
            return message
    return _brief(error)


_DETAIL_LIMIT: Final = 300

# pydantic's own wording ("1 validation error for ...", "3 validation errors for ..."): a
# server built on it (llama-cpp-python) answers a request it cannot parse with HTTP 500.
_VALIDATION = re.compile(r"\b\d+ validation errors? for\b")


def error_detail(body: str) -> str:
    """The human part of an error body (``error.message`` when it is JSON, else the body),
    on one line, its control characters escaped, cut to its first part."""
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    text = body
    if isinstance(parsed, dict):
        if "error" in parsed:
            text = _error_text(parsed["error"])
        else:
            message = parsed.get("message") or parsed.get("detail")
            if isinstance(message, str):
                text = message
    return _clean(text) or "(empty body)"


def is_validation_failure(detail: str) -> bool:
    """Whether an error's detail is a request validation failure, which no retry can fix."""
    return _VALIDATION.search(detail) is not None


def _clean(text: str) -> str:
    # A server's text goes into an error a terminal prints: escapes and line breaks must not
    # reach it, and a long body must not drown the rest of the message.
    snippet = printable(" ".join(text.split()))
    return snippet if len(snippet) <= _DETAIL_LIMIT else snippet[:_DETAIL_LIMIT] + "…"
