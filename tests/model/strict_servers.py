"""Local OpenAI-compatible servers as strict as the real ones they stand for.

Each answers every valid request with the next planned :class:`Answer` (streamed when the
request asks for it, as one JSON completion otherwise) and refuses an invalid request the way
its real server does:

- :class:`DeepSeekServer`: thinking mode (on unless ``thinking.type`` is ``disabled``) streams
  ``reasoning_content`` and answers HTTP 400 "The reasoning_content in the thinking mode must
  be passed back to the API" when an assistant message with tool calls comes back without it;
  ``thinking`` and ``reasoning_effort`` are checked against DeepSeek's values.
- :class:`LlamaCppPythonServer` (``python -m llama_cpp.server``): an assistant ``content`` of
  ``null`` fails its request model with HTTP 500 and pydantic's validation text; streaming
  with tools dies after HTTP 200, the stream cut before any ``finish_reason``.
- :class:`LlamaServer` (llama.cpp's own ``llama-server``): a failure after HTTP 200 is an
  ``error: {...}`` line, then ``data: [DONE]``.
- :class:`EmptyContentRejectingServer`: refuses ``content: ""`` beside tool calls (HTTP 400).
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from typing import Any

from .fake_openai import Captured, FakeOpenAI, Reply, chunk, sse

DEEPSEEK_MISSING_REASONING = (
    "The reasoning_content in the thinking mode must be passed back to the API"
)
PYDANTIC_NULL_CONTENT = (
    "1 validation error for ChatCompletionRequestAssistantMessage\n"
    "content\n"
    "  Input should be a valid string [type=string_type, input_value=None, "
    "input_type=NoneType]\n"
    "    For further information visit https://errors.pydantic.dev/2.10/v/string_type"
)
EMPTY_CONTENT_REFUSED = "messages: an assistant message with tool_calls must not have empty content"
LLAMA_SERVER_TOOLS_STREAM = "Cannot use tools with stream"


@dataclass(frozen=True)
class Answer:
    """One planned reply: text, reasoning (thinking servers), tool calls ``(id, name, args)``."""

    text: str = ""
    reasoning: str = ""
    calls: tuple[tuple[str, str, str], ...] = ()


def error_reply(status: int, message: str, kind: str = "invalid_request_error") -> Reply:
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return Reply(
        status,
        headers={"content-type": "application/json"},
        pieces=[json.dumps(body).encode()],
        mode="length",
    )


class StrictServer:
    """The plan, the checks, and the answer's wire form; subclasses add their server's checks."""

    model = "strict-test"
    thinks = False

    def __init__(self, *answers: Answer) -> None:
        self.plan: deque[Answer] = deque(answers)
        self.fake = FakeOpenAI(self._respond)

    @property
    def base_url(self) -> str:
        return self.fake.base_url

    @property
    def requests(self) -> list[Captured]:
        return self.fake.requests

    async def start(self) -> None:
        await self.fake.start()

    async def stop(self) -> None:
        await self.fake.stop()

    def _respond(self, request: Captured) -> Reply:
        body = request.body
        refused = self.check(body)
        if refused is not None:
            return refused
        if not self.plan:
            return error_reply(500, "the test planned no further answer", "server_error")
        answer = self.plan.popleft()
        if body.get("stream"):
            return self.streamed(body, answer)
        return self.whole(body, answer)

    def check(self, body: dict[str, Any]) -> Reply | None:
        for message in body["messages"]:
            if message["role"] not in ("system", "user", "assistant", "tool"):
                return error_reply(400, f"unknown role {message['role']!r}")
        return None

    def thinking(self, body: dict[str, Any]) -> bool:
        return self.thinks

    def streamed(self, body: dict[str, Any], answer: Answer) -> Reply:
        thinking = self.thinking(body)
        first: dict[str, Any] = {"role": "assistant", "content": None}
        if thinking:
            first["reasoning_content"] = ""
        events: list[dict[str, Any]] = [chunk(first, model=self.model)]
        if thinking:
            half = len(answer.reasoning) // 2
            for piece in (answer.reasoning[:half], answer.reasoning[half:]):
                if piece:
                    events.append(chunk({"reasoning_content": piece}, model=self.model))
        if answer.text:
            events.append(chunk({"content": answer.text}, model=self.model))
        for index, (call_id, name, arguments) in enumerate(answer.calls):
            call = {"index": index, "id": call_id, "type": "function"}
            call["function"] = {"name": name, "arguments": arguments}
            events.append(chunk({"tool_calls": [call]}, model=self.model))
        finish = "tool_calls" if answer.calls else "stop"
        events.append(chunk({}, finish=finish, model=self.model))
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
            events.append(chunk(usage=usage, model=self.model))
        return Reply(pieces=sse(*events))

    def whole(self, body: dict[str, Any], answer: Answer) -> Reply:
        message: dict[str, Any] = {"role": "assistant", "content": answer.text or None}
        if self.thinking(body):
            message["reasoning_content"] = answer.reasoning
        if answer.calls:
            message["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                for i, n, a in answer.calls
            ]
        completion = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1700000000,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if answer.calls else "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
        return Reply(
            headers={"content-type": "application/json"},
            pieces=[json.dumps(completion).encode()],
            mode="length",
        )


def _assistant_calls(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] == "assistant" and m.get("tool_calls")]


class DeepSeekServer(StrictServer):
    model = "deepseek-chat"
    efforts = ("minimal", "low", "medium", "high", "xhigh", "max", "ultra")

    def thinking(self, body: dict[str, Any]) -> bool:
        return (body.get("thinking") or {}).get("type") != "disabled"

    def check(self, body: dict[str, Any]) -> Reply | None:
        thinking = body.get("thinking")
        if thinking is not None and (
            not isinstance(thinking, dict) or thinking.get("type") not in ("enabled", "disabled")
        ):
            return error_reply(400, "thinking.type must be one of enabled, disabled")
        effort = body.get("reasoning_effort")
        if effort is not None and effort not in self.efforts:
            return error_reply(400, f"reasoning_effort must be one of {', '.join(self.efforts)}")
        if self.thinking(body):
            for message in _assistant_calls(body):
                if not isinstance(message.get("reasoning_content"), str):
                    return error_reply(400, DEEPSEEK_MISSING_REASONING)
        return super().check(body)


class LlamaCppPythonServer(StrictServer):
    model = "qwen2.5-7b-instruct"

    def check(self, body: dict[str, Any]) -> Reply | None:
        for message in body["messages"]:
            if (
                message["role"] == "assistant"
                and "content" in message
                and message["content"] is None
            ):
                return error_reply(500, PYDANTIC_NULL_CONTENT, "internal_server_error")
        return super().check(body)

    def streamed(self, body: dict[str, Any], answer: Answer) -> Reply:
        if body.get("tools"):
            # The chat handler raises inside the stream: the role chunk went out, then the
            # body ends with no finish_reason, no error and no [DONE].
            first = chunk({"role": "assistant", "content": None}, model=self.model)
            return Reply(pieces=sse(first, done=False))
        return super().streamed(body, answer)


class LlamaServer(StrictServer):
    model = "llama-server"

    def streamed(self, body: dict[str, Any], answer: Answer) -> Reply:
        if body.get("tools"):
            error = {"code": 500, "message": LLAMA_SERVER_TOOLS_STREAM, "type": "server_error"}
            return Reply(pieces=[f"error: {json.dumps(error)}\n\n".encode(), b"data: [DONE]\n\n"])
        return super().streamed(body, answer)


class EmptyContentRejectingServer(StrictServer):
    def check(self, body: dict[str, Any]) -> Reply | None:
        for message in _assistant_calls(body):
            if message.get("content") == "":
                return error_reply(400, EMPTY_CONTENT_REFUSED)
        return super().check(body)
