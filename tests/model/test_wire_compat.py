"""Wire compatibility against strict local servers (``strict_servers.py``): DeepSeek's thinking
mode, tool-call ``content`` that strict servers accept, streaming failures and the
non-streaming mode, errors that are not retried and whose body reaches the message."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import pytest

from tether.model import (
    Completion,
    Message,
    ModelError,
    ModelRequest,
    OpenAICompatClient,
    ToolCall,
    ToolSchema,
)
from tether.model._client import complete
from tether.model._openai_wire import WireOptions

from .fake_openai import FakeOpenAI, Reply
from .strict_servers import (
    DEEPSEEK_MISSING_REASONING,
    LLAMA_SERVER_TOOLS_STREAM,
    Answer,
    DeepSeekServer,
    EmptyContentRejectingServer,
    LlamaCppPythonServer,
    LlamaServer,
    StrictServer,
    error_reply,
)

S = TypeVar("S", bound=StrictServer)
LS = ToolSchema("ls", "List a directory", {"type": "object", "properties": {}})
HINT = (
    "if this server cannot stream (some cannot when tools are offered), set stream = false "
    "for this model in the configuration or pass --no-stream"
)


async def started(server: S) -> AsyncIterator[S]:
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def client_for(server: StrictServer | FakeOpenAI, **wire: Any) -> OpenAICompatClient:
    return OpenAICompatClient(
        base_url=server.base_url,
        api_key="sk-test",
        model="test-model",
        retry_base_delay=0.001,
        timeout=5.0,
        wire=WireOptions(**wire),
    )


async def tool_loop(
    client: OpenAICompatClient, prompt: str, run: Callable[[ToolCall], str], steps: int
) -> list[Message]:
    """What the agent does: ask, append the reply, answer its tool calls, ask again."""
    messages = [Message.user(prompt)]
    async with client:
        for _ in range(steps):
            reply = await complete(client, ModelRequest(messages=list(messages), tools=[LS]))
            messages.append(reply.to_message())
            for call in reply.tool_calls:
                messages.append(Message.tool(call.id, run(call)))
    return messages


# -- DeepSeek thinking mode -----------------------------------------------------------------
@pytest.fixture
async def deepseek() -> AsyncIterator[DeepSeekServer]:
    server = DeepSeekServer(
        Answer(reasoning="I should list the directory.", calls=(("call_0", "ls", "{}"),)),
        Answer(reasoning="", calls=(("call_1", "ls", '{"path": "src"}'),)),
        Answer(reasoning="Both listed.", text="src holds main.py."),
    )
    async for running in started(server):
        yield running


async def test_a_thinking_mode_tool_loop_of_three_requests_passes(
    deepseek: DeepSeekServer,
) -> None:
    client = client_for(deepseek, thinking="enabled", reasoning_effort="high")
    messages = await tool_loop(client, "What is in src?", lambda call: "main.py", steps=3)
    assert [m.reasoning for m in messages if m.role == "assistant"] == [
        "I should list the directory.",
        "",  # an empty reasoning_content is kept, and sent back
        "Both listed.",
    ]
    assert messages[-1].content == "src holds main.py."
    first, second, third = (r.body for r in deepseek.requests)
    assert (first["thinking"], first["reasoning_effort"]) == ({"type": "enabled"}, "high")
    assert third["messages"][1] == {
        "role": "assistant",
        "content": "",
        "reasoning_content": "I should list the directory.",
        "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
        ],
    }
    assert third["messages"][3]["reasoning_content"] == ""
    assert second["messages"][1] == third["messages"][1]


async def test_reasoning_not_sent_back_is_refused_as_deepseek_does(
    deepseek: DeepSeekServer,
) -> None:
    client = client_for(deepseek, send_reasoning=False)
    with pytest.raises(ModelError) as info:
        await tool_loop(client, "What is in src?", lambda call: "main.py", steps=2)
    assert info.value.code == "MODEL_BAD_REQUEST"
    assert str(info.value) == (
        f"openai-compatible server ({deepseek.base_url}/chat/completions) rejected the request "
        f"(HTTP 400): {DEEPSEEK_MISSING_REASONING}"
    )
    assert len(deepseek.requests) == 2  # a deterministic 400 is not retried


async def test_reasoning_of_earlier_turns_without_tool_calls_is_dropped(
    deepseek: DeepSeekServer,
) -> None:
    deepseek.plan.clear()
    deepseek.plan.append(Answer(reasoning="Still easy.", text="4 again."))
    history = [
        Message.user("2+2?"),
        Message.assistant("4", reasoning="Easy."),
        Message.user("and again?"),
    ]
    async with client_for(deepseek) as client:
        await complete(client, ModelRequest(messages=history))
    assert deepseek.requests[0].body["messages"] == [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "and again?"},
    ]


async def test_thinking_disabled_sends_no_reasoning_and_needs_none(
    deepseek: DeepSeekServer,
) -> None:
    client = client_for(deepseek, thinking="disabled")
    messages = await tool_loop(client, "What is in src?", lambda call: "main.py", steps=3)
    assert [m.reasoning for m in messages if m.role == "assistant"] == [None, None, None]
    assert all("reasoning_content" not in m for r in deepseek.requests for m in r.body["messages"])
    assert deepseek.requests[0].body["thinking"] == {"type": "disabled"}


async def test_a_reasoning_effort_deepseek_does_not_know_is_its_400(
    deepseek: DeepSeekServer,
) -> None:
    async with client_for(deepseek, reasoning_effort="extreme") as client:
        with pytest.raises(ModelError) as info:
            await complete(client, ModelRequest(messages=[Message.user("hi")]))
    assert info.value.code == "MODEL_BAD_REQUEST"
    assert "reasoning_effort must be one of minimal, low, medium, high" in str(info.value)


async def test_thinking_mode_without_streaming(deepseek: DeepSeekServer) -> None:
    client = client_for(deepseek, stream=False)
    messages = await tool_loop(client, "What is in src?", lambda call: "main.py", steps=3)
    assert messages[-1] == Message.assistant("src holds main.py.", reasoning="Both listed.")
    assert deepseek.requests[2].body["messages"][1]["reasoning_content"] == (
        "I should list the directory."
    )


# -- tool-call content ----------------------------------------------------------------------
def _one_call_then_text() -> tuple[Answer, Answer]:
    return Answer(calls=(("c1", "ls", "{}"),)), Answer(text="done")


@pytest.mark.parametrize("content", ["empty", "omit"])
async def test_llama_cpp_python_accepts_the_default_and_omitted_content(content: str) -> None:
    async for server in started(LlamaCppPythonServer(*_one_call_then_text())):
        client = client_for(server, stream=False, tool_call_content=content)
        messages = await tool_loop(client, "list", lambda call: "a", steps=2)
        assert messages[-1].content == "done"
        sent = server.requests[1].body["messages"][1]
        assert sent.get("content", "absent") == ("" if content == "empty" else "absent")


async def test_llama_cpp_python_refuses_null_content_with_a_500_that_is_not_retried() -> None:
    async for server in started(LlamaCppPythonServer(*_one_call_then_text())):
        client = client_for(server, stream=False, tool_call_content="null")
        with pytest.raises(ModelError) as info:
            await tool_loop(client, "list", lambda call: "a", steps=2)
        assert info.value.code == "MODEL_BAD_REQUEST"
        assert info.value.status == 500
        assert str(info.value) == (
            f"openai-compatible server ({server.base_url}/chat/completions) rejected the "
            "request as invalid (HTTP 500, not retried): 1 validation error for "
            "ChatCompletionRequestAssistantMessage content Input should be a valid string "
            "[type=string_type, input_value=None, input_type=NoneType] For further "
            "information visit https://errors.pydantic.dev/2.10/v/string_type"
        )
        assert len(server.requests) == 2


async def test_a_server_that_refuses_empty_content_takes_null_or_omitted() -> None:
    async for server in started(EmptyContentRejectingServer(*_one_call_then_text())):
        with pytest.raises(ModelError) as info:
            await tool_loop(client_for(server), "list", lambda call: "a", steps=2)
        assert info.value.code == "MODEL_BAD_REQUEST"
        assert "must not have empty content" in str(info.value)
        for content in ("null", "omit"):
            server.plan.clear()
            server.plan.extend(_one_call_then_text())
            client = client_for(server, tool_call_content=content)
            messages = await tool_loop(client, "list", lambda call: "a", steps=2)
            assert messages[-1].content == "done"


# -- streaming failures and the non-streaming mode ------------------------------------------
async def test_a_stream_cut_after_http_200_says_so_and_no_stream_works() -> None:
    answers = (Answer(text="listed"), Answer(text="listed"))
    async for server in started(LlamaCppPythonServer(*answers)):
        async with client_for(server) as client:
            with pytest.raises(ModelError) as info:
                await complete(client, ModelRequest([Message.user("list")], tools=[LS]))
        assert info.value.code == "MODEL_BAD_RESPONSE"
        assert str(info.value) == (
            f"bad response from openai-compatible server ({server.base_url}/chat/completions):"
            f" the response ended before a finish_reason (truncated); {HINT}"
        )
        async with client_for(server, stream=False) as client:
            reply = await complete(client, ModelRequest([Message.user("list")], tools=[LS]))
        assert reply == Completion(text="listed", usage=reply.usage)
        last = server.requests[-1]
        assert last.body["stream"] is False and "stream_options" not in last.body
        assert last.headers["accept"] == "application/json"


async def test_an_error_line_after_http_200_names_the_servers_message() -> None:
    async for server in started(LlamaServer(Answer(text="listed"))):
        async with client_for(server) as client:
            with pytest.raises(ModelError) as info:
                await complete(client, ModelRequest([Message.user("list")], tools=[LS]))
        assert info.value.code == "MODEL_BAD_RESPONSE"
        assert str(info.value) == (
            f"bad response from openai-compatible server ({server.base_url}/chat/completions):"
            f" the server failed after answering HTTP 200: {LLAMA_SERVER_TOOLS_STREAM}; {HINT}"
        )
        assert len(server.requests) == 1


async def test_an_error_event_after_output_names_the_servers_message(server: FakeOpenAI) -> None:
    text = b'data: {"choices": [{"index": 0, "delta": {"content": "Hel"}}]}\n\n'
    failure = b'event: error\ndata: {"error": {"message": "upstream \\u001b[2Jreset"}}\n\n'
    server.add(Reply(pieces=[text, failure]))
    async with client_for(server) as client:
        with pytest.raises(ModelError) as info:
            await complete(client, ModelRequest([Message.user("hi")]))
    assert str(info.value).endswith(
        f"the server failed after answering HTTP 200: upstream \\x1b[2Jreset; {HINT}"
    )
    assert len(server.requests) == 1  # output had started: not retried


async def test_a_response_broken_off_after_http_200_on_every_attempt_suggests_no_stream(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tether.model import _openai_compat as openai_compat

    async def no_sleep(seconds: float) -> None:
        return None

    monkeypatch.setattr(openai_compat, "_sleep", no_sleep)
    role = b'data: {"choices": [{"index": 0, "delta": {"role": "assistant"}}]}\n\n'
    server.add(*[Reply(mode="cut", pieces=[role]) for _ in range(4)])
    async with client_for(server) as client:
        with pytest.raises(ModelError) as info:
            await complete(client, ModelRequest([Message.user("list")], tools=[LS]))
    assert info.value.code == "MODEL_BAD_RESPONSE"
    assert str(info.value) == (
        f"bad response from openai-compatible server ({server.base_url}/chat/completions): the "
        "response broke off after HTTP 200, before any output, on 4 attempts "
        "(RemoteProtocolError: peer closed connection without sending complete message body "
        f"(incomplete chunked read)); {HINT}"
    )
    assert len(server.requests) == 4


# -- errors that are not retried ------------------------------------------------------------
@pytest.mark.parametrize("status", [400, 402, 413, 422])
async def test_a_deterministic_4xx_is_not_retried(server: FakeOpenAI, status: int) -> None:
    server.add(*[error_reply(status, "Insufficient Balance") for _ in range(4)])
    async with client_for(server) as client:
        with pytest.raises(ModelError) as info:
            await complete(client, ModelRequest([Message.user("hi")]))
    assert (info.value.code, info.value.status) == ("MODEL_BAD_REQUEST", status)
    assert str(info.value).endswith(f"rejected the request (HTTP {status}): Insufficient Balance")
    assert len(server.requests) == 1


async def test_the_error_body_is_cut_and_its_control_characters_escaped(
    server: FakeOpenAI,
) -> None:
    text = "bad \x1b[31mrequest\x1b[0m\r\n\tat line 1\u202e" + "x" * 400
    server.add(error_reply(400, text))
    plain = b"<html>\x07oops</html>\n" + b"y" * 400
    server.add(Reply(400, headers={"content-type": "text/html"}, pieces=[plain], mode="length"))
    async with client_for(server) as client:
        with pytest.raises(ModelError) as first:
            await complete(client, ModelRequest([Message.user("hi")]))
        with pytest.raises(ModelError) as second:
            await complete(client, ModelRequest([Message.user("hi")]))
    detail = str(first.value).split("(HTTP 400): ", 1)[1]
    assert detail.startswith("bad \\x1b[31mrequest\\x1b[0m at line 1\\u202exxx")
    assert detail.endswith("x…") and len(detail) == 301
    assert str(second.value).split("(HTTP 400): ", 1)[1].startswith("<html>\\x07oops</html> yyy")


async def test_a_500_that_is_not_a_validation_error_is_still_retried(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tether.model import _openai_compat as openai_compat

    async def no_sleep(seconds: float) -> None:
        return None

    monkeypatch.setattr(openai_compat, "_sleep", no_sleep)
    server.add(error_reply(500, "CUDA out of memory", "server_error"))
    server.add(
        Reply(
            pieces=[
                b'data: {"choices": [{"index": 0, "delta": {"content": "ok"}, '
                b'"finish_reason": "stop"}]}\n\n'
            ]
        )
    )
    async with client_for(server) as client:
        reply = await complete(client, ModelRequest([Message.user("hi")]))
    assert reply.text == "ok"
    assert len(server.requests) == 2
    assert json.loads(json.dumps(server.requests[1].body)) == server.requests[0].body
