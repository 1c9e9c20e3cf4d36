"""OpenAICompatClient against a real local HTTP server replaying streamed answers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tether._signals import AbortedError, AbortSignal
from tether.model import (
    Completion,
    Message,
    ModelError,
    ModelRequest,
    OpenAICompatClient,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolSchema,
    Usage,
)
from tether.model import _openai_compat as oc
from tether.model._client import complete

from .fake_openai import FakeOpenAI, Reply, chunk, json_error, sse

REQUEST = ModelRequest(messages=[Message.system("Be brief."), Message.user("Say hello")])


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Backoff delays the client asked for; nothing actually sleeps."""
    recorded: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        recorded.append(seconds)

    monkeypatch.setattr(oc, "_sleep", fake_sleep)
    return recorded


def make_client(server: FakeOpenAI, **options: Any) -> OpenAICompatClient:
    settings: dict[str, Any] = {
        "base_url": server.base_url,
        "api_key": "sk-test",
        "model": "gpt-test",
        "retry_base_delay": 0.001,
        "timeout": 5.0,
        **options,
    }
    return OpenAICompatClient(**settings)


async def collect(
    client: OpenAICompatClient, request: ModelRequest = REQUEST, signal: AbortSignal | None = None
) -> list[StreamEvent]:
    async with client:
        return [event async for event in client.stream(request, signal)]


async def fail(
    client: OpenAICompatClient, request: ModelRequest = REQUEST
) -> tuple[ModelError, list[StreamEvent]]:
    seen: list[StreamEvent] = []
    async with client:
        with pytest.raises(ModelError) as info:
            async for event in client.stream(request):
                seen.append(event)
    return info.value, seen


TEXT_STREAM = sse(
    chunk({"role": "assistant", "content": ""}),
    chunk({"content": "Hel"}),
    chunk({"content": "lo"}),
    chunk({"content": " world"}),
    chunk({}, finish="stop"),
    chunk(usage={"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}),
)


async def test_plain_text_stream(server: FakeOpenAI) -> None:
    server.add(Reply(pieces=TEXT_STREAM))
    events = await collect(make_client(server))
    assert events == [
        TextDelta("Hel"),
        TextDelta("lo"),
        TextDelta(" world"),
        Completion(
            text="Hello world",
            reasoning=None,
            tool_calls=(),
            usage=Usage(prompt_tokens=9, completion_tokens=3),
            finish_reason="stop",
        ),
    ]
    [sent] = server.requests
    assert sent.method == "POST"
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.headers["content-type"] == "application/json"
    assert sent.body == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Say hello"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def _tool_call_stream() -> list[bytes]:
    return sse(
        chunk({"role": "assistant", "content": "Let me look."}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "read", "arguments": ""},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"pa'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'th": "a.txt"}'}}]}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "ls", "arguments": '{"pat'},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": 'h": "."}'}}]}),
        chunk({}, finish="tool_calls"),
        chunk(usage={"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70}),
    )


EXPECTED_CALLS = (
    ToolCall(id="call_a", name="read", arguments='{"path": "a.txt"}'),
    ToolCall(id="call_b", name="ls", arguments='{"path": "."}'),
)


async def test_parallel_tool_calls_with_split_arguments(server: FakeOpenAI) -> None:
    server.add(Reply(pieces=_tool_call_stream()))
    events = await collect(make_client(server))
    assert events == [
        TextDelta("Let me look."),
        ToolCallDelta(0, "call_a", "read", ""),
        ToolCallDelta(0, None, None, '{"pa'),
        ToolCallDelta(0, None, None, 'th": "a.txt"}'),
        ToolCallDelta(1, "call_b", "ls", '{"pat'),
        ToolCallDelta(1, None, None, 'h": "."}'),
        Completion(
            text="Let me look.",
            tool_calls=EXPECTED_CALLS,
            usage=Usage(50, 20),
            finish_reason="tool_calls",
        ),
    ]


async def test_sse_lines_split_across_network_reads(server: FakeOpenAI) -> None:
    blob = b"".join(_tool_call_stream())
    server.add(Reply(pieces=[blob[i : i + 7] for i in range(0, len(blob), 7)]))
    events = await collect(make_client(server))
    final = events[-1]
    assert isinstance(final, Completion)
    assert final.tool_calls == EXPECTED_CALLS
    assert final.text == "Let me look."


async def test_request_shape_with_tools_and_history(server: FakeOpenAI) -> None:
    server.add(Reply(pieces=TEXT_STREAM))
    schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    request = ModelRequest(
        messages=[
            Message.system("sys"),
            Message.user("read a.txt", name="alice"),
            Message.assistant(
                "",
                tool_calls=[ToolCall("call_1", "read", '{"path": "a.txt"}')],
                reasoning="I should read it",
            ),
            Message.tool("call_1", "hello"),
            Message.assistant("It says hello.", reasoning="easy"),
            Message.user("thanks"),
        ],
        tools=[ToolSchema("read", "Read a file", schema)],
        session_id="s1",
        depth=2,
        label="probe",
    )
    await collect(make_client(server, extra_body={"temperature": 0}), request)
    assert server.requests[0].body == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "read a.txt", "name": "alice"},
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": "I should read it",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "read", "arguments": '{"path": "a.txt"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "hello"},
            # no tool calls, before the last user message: DeepSeek ignores its reasoning
            {"role": "assistant", "content": "It says hello."},
            {"role": "user", "content": "thanks"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
            {
                "type": "function",
                "function": {"name": "read", "description": "Read a file", "parameters": schema},
            }
        ],
        "tool_choice": "auto",
        "temperature": 0,
    }


async def test_deepseek_reasoning_content_and_keepalives(server: FakeOpenAI) -> None:
    usage = {
        "prompt_tokens": 12,
        "completion_tokens": 30,
        "total_tokens": 42,
        "prompt_cache_hit_tokens": 0,
        "prompt_cache_miss_tokens": 12,
        "completion_tokens_details": {"reasoning_tokens": 20},
    }
    model = "deepseek-reasoner"
    server.add(
        Reply(
            pieces=sse(
                ": keep-alive",
                chunk({"role": "assistant", "content": None, "reasoning_content": ""}, model=model),
                chunk({"content": None, "reasoning_content": "The user "}, model=model),
                chunk({"content": None, "reasoning_content": "wants 2+2."}, model=model),
                ": keep-alive",
                chunk({"content": "4", "reasoning_content": None}, model=model),
                chunk({"content": "", "reasoning_content": None}, "stop", usage, model=model),
            )
        )
    )
    events = await collect(make_client(server, model=model))
    assert events == [
        ReasoningDelta("The user "),
        ReasoningDelta("wants 2+2."),
        TextDelta("4"),
        Completion(
            text="4",
            reasoning="The user wants 2+2.",
            usage=Usage(12, 30),
            finish_reason="stop",
        ),
    ]


@pytest.mark.parametrize(
    ("raw", "mapped"),
    [("length", "length"), ("content_filter", "error"), ("insufficient_system_resource", "error")],
)
async def test_finish_reason_mapping(server: FakeOpenAI, raw: str, mapped: str) -> None:
    server.add(Reply(pieces=sse(chunk({"content": "x"}), chunk({}, finish=raw))))
    events = await collect(make_client(server))
    final = events[-1]
    assert isinstance(final, Completion)
    assert final.finish_reason == mapped
    assert final.usage == Usage(0, 0)


async def test_stop_with_tool_calls_counts_as_tool_calls(server: FakeOpenAI) -> None:
    call = {"index": 0, "id": "c1", "function": {"name": "ls", "arguments": "{}"}}
    server.add(Reply(pieces=sse(chunk({"tool_calls": [call]}), chunk({}, finish="stop"))))
    final = (await collect(make_client(server)))[-1]
    assert isinstance(final, Completion)
    assert final.finish_reason == "tool_calls"
    assert final.tool_calls == (ToolCall("c1", "ls", "{}"),)


async def test_tool_call_deltas_without_index(server: FakeOpenAI) -> None:
    server.add(
        Reply(
            pieces=sse(
                chunk({"tool_calls": [{"id": "c1", "function": {"name": "ls", "arguments": "{"}}]}),
                chunk({"tool_calls": [{"function": {"arguments": "}"}}]}),
                chunk(
                    {"tool_calls": [{"id": "c2", "function": {"name": "read", "arguments": ""}}]}
                ),
                chunk({}, finish="tool_calls"),
            )
        )
    )
    final = (await collect(make_client(server)))[-1]
    assert isinstance(final, Completion)
    assert final.tool_calls == (ToolCall("c1", "ls", "{}"), ToolCall("c2", "read", ""))


async def test_whole_json_completion_is_accepted(server: FakeOpenAI) -> None:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "Hi",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "ls", "arguments": "{}"},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
    }
    server.add(
        Reply(
            headers={"content-type": "application/json"},
            pieces=[json.dumps(body).encode()],
            mode="length",
        )
    )
    events = await collect(make_client(server))
    assert events == [
        Completion(
            text="Hi",
            tool_calls=(ToolCall("c1", "ls", "{}"),),
            usage=Usage(3, 4),
            finish_reason="tool_calls",
        )
    ]


# -- retries ------------------------------------------------------------------------------


async def test_429_then_success_honours_retry_after(
    server: FakeOpenAI, sleeps: list[float]
) -> None:
    server.add(json_error(429, "Rate limit reached", **{"retry-after": "1.5"}))
    server.add(Reply(pieces=TEXT_STREAM))
    events = await collect(make_client(server))
    assert isinstance(events[-1], Completion)
    assert events[-1].text == "Hello world"
    assert len(server.requests) == 2
    assert server.requests[0].body == server.requests[1].body
    assert sleeps == [1.5]


async def test_retry_after_is_capped_and_ms_header_preferred(
    server: FakeOpenAI, sleeps: list[float]
) -> None:
    server.add(json_error(429, "slow down", **{"retry-after": "3600"}))
    server.add(json_error(429, "slow down", **{"retry-after": "9", "retry-after-ms": "250"}))
    server.add(Reply(pieces=TEXT_STREAM))
    await collect(make_client(server, retry_after_cap=2.0))
    assert sleeps == [2.0, 0.25]


async def test_500_then_success_uses_exponential_backoff(
    server: FakeOpenAI, sleeps: list[float]
) -> None:
    server.add(json_error(500, "internal"), json_error(502, "bad gateway"))
    server.add(Reply(pieces=TEXT_STREAM))
    events = await collect(make_client(server, retry_base_delay=0.01))
    assert isinstance(events[-1], Completion)
    assert len(server.requests) == 3
    assert len(sleeps) == 2
    assert 0.005 <= sleeps[0] <= 0.01
    assert 0.01 <= sleeps[1] <= 0.02


async def test_rate_limit_exhausted(server: FakeOpenAI, sleeps: list[float]) -> None:
    server.add(*[json_error(429, "Rate limit reached for requests") for _ in range(3)])
    error, seen = await fail(make_client(server, max_retries=2))
    assert error.code == "MODEL_RATE_LIMITED"
    assert error.status == 429
    assert "after 3 attempts" in str(error)
    assert "Rate limit reached for requests" in str(error)
    assert len(server.requests) == 3
    assert len(sleeps) == 2
    assert seen == []


async def test_server_errors_exhausted(server: FakeOpenAI, sleeps: list[float]) -> None:
    server.add(*[json_error(503, "overloaded") for _ in range(4)])
    error, _ = await fail(make_client(server))
    assert error.code == "MODEL_UNAVAILABLE"
    assert "HTTP 503" in str(error)
    assert "overloaded" in str(error)
    assert len(server.requests) == 4  # default: 3 retries after the first attempt


async def test_connection_refused_exhausted(sleeps: list[float]) -> None:
    probe = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    client = OpenAICompatClient(
        base_url=f"http://127.0.0.1:{port}/v1", api_key="k", model="m", max_retries=1
    )
    async with client:
        with pytest.raises(ModelError) as info:
            await complete(client, REQUEST)
    assert info.value.code == "MODEL_UNAVAILABLE"
    assert "unreachable after 2 attempts" in str(info.value)
    assert f"127.0.0.1:{port}" in str(info.value)
    assert len(sleeps) == 1


async def test_a_server_that_accepts_and_never_answers_is_a_timeout_not_retried(
    server: FakeOpenAI,
) -> None:
    server.add(Reply(mode="hang"), Reply(mode="hang"))
    client = make_client(server, timeout=0.25, max_retries=1)
    error, _ = await fail(client)
    assert error.code == "MODEL_TIMEOUT"
    assert str(error) == (
        f"openai-compatible server ({server.base_url}/chat/completions) accepted the request "
        "but sent nothing for 0.25 s; not retried, as it may still be working on it. For a "
        "slow model raise the read timeout: --model-timeout SECONDS or timeout in its "
        "[models.NAME] table"
    )
    assert len(server.requests) == 1


async def test_silence_after_http_200_names_the_wait(
    server: FakeOpenAI, sleeps: list[float]
) -> None:
    server.add(Reply(pieces=[], stall=True), Reply(pieces=[], stall=True))
    client = make_client(server, timeout=0.25, max_retries=1)
    error, _ = await fail(client)
    assert error.code == "MODEL_BAD_RESPONSE"
    assert "on 2 attempts (ReadTimeout: nothing received for 0.25 s)" in str(error)


async def test_connection_dropped_before_output_is_retried(
    server: FakeOpenAI, sleeps: list[float]
) -> None:
    server.add(Reply(mode="cut", pieces=[b": keep-alive\n\n"]), Reply(pieces=TEXT_STREAM))
    events = await collect(make_client(server))
    assert isinstance(events[-1], Completion)
    assert len(server.requests) == 2


# -- failures that are not retried ------------------------------------------------------


async def test_401_names_the_key_variable(server: FakeOpenAI) -> None:
    server.add(json_error(401, "Authentication Fails (no such user)"))
    env = {"DEEPSEEK_API_KEY": "sk-bad", "DEEPSEEK_BASE_URL": server.base_url}
    client = OpenAICompatClient.from_preset("deepseek", "deepseek-chat", env)
    error, _ = await fail(client)
    assert error.code == "MODEL_AUTH"
    assert error.status == 401
    assert "DEEPSEEK_API_KEY" in str(error)
    assert "Authentication Fails" in str(error)
    assert len(server.requests) == 1
    assert server.requests[0].headers["authorization"] == "Bearer sk-bad"


async def test_403_without_env_names_the_constructor_argument(server: FakeOpenAI) -> None:
    server.add(json_error(403, "forbidden"))
    error, _ = await fail(make_client(server))
    assert error.code == "MODEL_AUTH"
    assert "api_key" in str(error)


async def test_404_names_model_and_base_url(server: FakeOpenAI) -> None:
    server.add(json_error(404, "The model `gpt-nope` does not exist"))
    error, _ = await fail(make_client(server, model="gpt-nope"))
    assert error.code == "MODEL_NOT_FOUND"
    assert "'gpt-nope'" in str(error)
    assert server.base_url in str(error)
    assert len(server.requests) == 1


async def test_400_is_a_bad_request_with_the_server_message(server: FakeOpenAI) -> None:
    server.add(json_error(400, "This model's maximum context length is 8192 tokens"))
    error, _ = await fail(make_client(server))
    assert error.code == "MODEL_BAD_REQUEST"
    assert "maximum context length" in str(error)
    assert len(server.requests) == 1


async def test_malformed_json_line(server: FakeOpenAI) -> None:
    server.add(Reply(pieces=[*sse(chunk({"content": "ok"}), done=False), b"data: {not json\n\n"]))
    error, seen = await fail(make_client(server))
    assert error.code == "MODEL_BAD_RESPONSE"
    assert "invalid JSON" in str(error)
    assert "{not json" in str(error)
    assert seen == [TextDelta("ok")]


async def test_connection_closed_mid_stream_is_not_retried(server: FakeOpenAI) -> None:
    pieces = sse(chunk({"content": "Hel"}), chunk({"content": "lo"}), done=False)
    server.add(Reply(mode="cut", pieces=pieces), Reply(pieces=TEXT_STREAM))
    error, seen = await fail(make_client(server))
    assert error.code == "MODEL_BAD_RESPONSE"
    assert "cut off after output had started" in str(error)
    assert seen == [TextDelta("Hel"), TextDelta("lo")]
    assert len(server.requests) == 1


async def test_stream_ending_after_finish_reason_and_usage_without_done_is_accepted(
    server: FakeOpenAI,
) -> None:
    usage = {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}
    pieces = sse(chunk({"content": "Hi"}), chunk({}, finish="stop"), chunk(usage=usage), done=False)
    server.add(Reply(mode="close", pieces=pieces))
    events = await collect(make_client(server))
    assert events == [TextDelta("Hi"), Completion(text="Hi", usage=Usage(5, 1))]
    assert len(server.requests) == 1


CUT_BEFORE_FINISH = (
    "the response ended before a finish_reason (truncated); if this server cannot stream "
    "(some cannot when tools are offered), set stream = false for this model in the "
    "configuration or pass --no-stream"
)


async def test_stream_cut_before_finish_reason_is_an_error(server: FakeOpenAI) -> None:
    server.add(Reply(mode="length", pieces=sse(chunk({"content": "Hi"}), done=False)))
    error, seen = await fail(make_client(server))
    assert error.code == "MODEL_BAD_RESPONSE"
    assert str(error) == f"bad response from {where(server)}: {CUT_BEFORE_FINISH}"
    assert seen == [TextDelta("Hi")]


async def test_done_without_finish_reason(server: FakeOpenAI) -> None:
    server.add(Reply(pieces=sse(chunk({"content": "Hi"}))))
    error, _ = await fail(make_client(server))
    assert error.code == "MODEL_BAD_RESPONSE"
    assert str(error) == f"bad response from {where(server)}: {CUT_BEFORE_FINISH}"


def where(server: FakeOpenAI) -> str:
    return f"openai-compatible server ({server.base_url}/chat/completions)"


async def test_html_body_is_not_an_event_stream(server: FakeOpenAI) -> None:
    page = b"<html><body><h1>Welcome to nginx!</h1></body></html>\n"
    server.add(Reply(headers={"content-type": "text/html"}, pieces=[page], mode="length"))
    error, _ = await fail(make_client(server))
    assert error.code == "MODEL_BAD_RESPONSE"
    assert "server-sent-events" in str(error)
    assert "text/html" in str(error)
    assert "Welcome to nginx" in str(error)


async def test_json_body_without_choices(server: FakeOpenAI) -> None:
    server.add(
        Reply(headers={"content-type": "application/json"}, pieces=[b'{"ok": 1}'], mode="length")
    )
    error, _ = await fail(make_client(server))
    assert error.code == "MODEL_BAD_RESPONSE"
    assert "without 'choices'" in str(error)


async def test_tool_call_without_name(server: FakeOpenAI) -> None:
    call = {"index": 0, "id": "c1", "function": {"arguments": "{}"}}
    server.add(Reply(pieces=sse(chunk({"tool_calls": [call]}), chunk({}, finish="tool_calls"))))
    error, _ = await fail(make_client(server))
    assert error.code == "MODEL_BAD_RESPONSE"
    assert "tool call #0 (id 'c1') has no function name" in str(error)


async def test_error_object_mid_stream(server: FakeOpenAI) -> None:
    err = {"error": {"message": "upstream overloaded", "type": "server_error"}}
    server.add(Reply(pieces=sse(chunk({"content": "a"}), err, done=False)))
    error, _ = await fail(make_client(server))
    assert error.code == "MODEL_BAD_RESPONSE"
    assert "upstream overloaded" in str(error)


async def test_unsupported_url_scheme_is_a_config_error() -> None:
    client = OpenAICompatClient(base_url="ftp://example.invalid", api_key="k", model="m")
    async with client:
        with pytest.raises(ModelError) as info:
            await complete(client, REQUEST)
    assert info.value.code == "MODEL_CONFIG"
    assert "ftp://example.invalid" in str(info.value)


# -- cancellation ---------------------------------------------------------------------------


async def test_abort_mid_stream_closes_the_response(server: FakeOpenAI) -> None:
    server.add(Reply(pieces=sse(chunk({"content": "first"}), done=False), stall=True))
    signal = AbortSignal()
    seen: list[StreamEvent] = []
    async with make_client(server) as client:
        with pytest.raises(AbortedError):
            async for event in client.stream(REQUEST, signal):
                seen.append(event)
                signal.abort("user pressed ctrl-c")
    assert seen == [TextDelta("first")]
    await asyncio.wait_for(server.client_gone.wait(), 5)


async def test_abort_while_waiting_for_the_next_chunk(server: FakeOpenAI) -> None:
    server.add(Reply(pieces=sse(chunk({"content": "first"}), done=False), stall=True))
    signal = AbortSignal()
    first = asyncio.Event()

    async def consume() -> list[StreamEvent]:
        seen = []
        async with make_client(server) as client:
            async for event in client.stream(REQUEST, signal):
                seen.append(event)
                first.set()
        return seen

    task = asyncio.ensure_future(consume())
    await asyncio.wait_for(first.wait(), 5)
    signal.abort("stop")
    with pytest.raises(AbortedError):
        await asyncio.wait_for(task, 5)
    await asyncio.wait_for(server.client_gone.wait(), 5)


async def test_abort_during_backoff(server: FakeOpenAI) -> None:
    server.add(json_error(429, "wait", **{"retry-after": "30"}))
    signal = AbortSignal()
    task = asyncio.ensure_future(collect(make_client(server), signal=signal))
    await asyncio.wait_for(server.request_seen.wait(), 5)
    signal.abort("give up")
    with pytest.raises(AbortedError):
        await asyncio.wait_for(task, 5)
    assert len(server.requests) == 1


async def test_already_aborted_sends_nothing(server: FakeOpenAI) -> None:
    signal = AbortSignal()
    signal.abort()
    with pytest.raises(AbortedError):
        await collect(make_client(server), signal=signal)
    assert server.requests == []


async def test_closing_the_stream_early_releases_the_connection(server: FakeOpenAI) -> None:
    server.add(Reply(pieces=sse(chunk({"content": "first"}), done=False), stall=True))
    async with make_client(server) as client:
        events = client.stream(REQUEST)
        assert isinstance(events, AsyncIterator)
        assert await anext(events) == TextDelta("first")
        await events.aclose()  # type: ignore[attr-defined]
    await asyncio.wait_for(server.client_gone.wait(), 5)


async def test_complete_returns_the_completion(server: FakeOpenAI) -> None:
    server.add(Reply(pieces=TEXT_STREAM))
    async with make_client(server) as client:
        result = await complete(client, REQUEST)
    assert result.text == "Hello world"
    assert result.to_message() == Message.assistant("Hello world")


async def test_injected_http_client_is_not_closed(server: FakeOpenAI) -> None:
    server.add(Reply(pieces=TEXT_STREAM))
    async with httpx.AsyncClient() as http:
        async with OpenAICompatClient(
            base_url=server.base_url, api_key=None, model="m", http_client=http
        ) as client:
            await complete(client, REQUEST)
        assert not http.is_closed
    assert "authorization" not in server.requests[0].headers


async def test_extra_body_none_removes_a_key(server: FakeOpenAI) -> None:
    server.add(Reply(pieces=TEXT_STREAM))
    await collect(make_client(server, extra_body={"stream_options": None, "max_tokens": 64}))
    body = server.requests[0].body
    assert "stream_options" not in body
    assert body["max_tokens"] == 64


async def test_max_retries_zero_tries_once(server: FakeOpenAI) -> None:
    server.add(json_error(500, "boom"), Reply(pieces=TEXT_STREAM))
    error, _ = await fail(make_client(server, max_retries=0))
    assert error.code == "MODEL_UNAVAILABLE"
    assert "after 1 attempt:" in str(error)
    assert len(server.requests) == 1
