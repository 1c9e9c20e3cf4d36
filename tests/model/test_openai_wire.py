"""Pure pieces of the OpenAI client: SSE decoding, assembly, Retry-After, byte splitting."""

from __future__ import annotations

import asyncio
import email.utils
import itertools
import time
from collections.abc import AsyncIterator

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.model import Completion, Message, ModelRequest, OpenAICompatClient, ToolCall, Usage
from tether.model._client import complete
from tether.model._openai_compat import retry_after_seconds
from tether.model._sse import SSEDecoder, SSEEvent, SSEFormatError

from .fake_openai import chunk, sse


def feed_all(lines: list[str]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events = [e for line in lines if (e := decoder.feed_line(line)) is not None]
    tail = decoder.flush()
    return [*events, tail] if tail is not None else events


def test_sse_decoder_joins_multiline_data_and_skips_comments() -> None:
    lines = [
        "\ufeff: hello",
        "event: message",
        "id: 7",
        "retry: 1000",
        "data: {",
        'data:  "a": 1}',
        "",
        "",
        "data",
        "",
        "data: last",
    ]
    assert feed_all(lines) == [
        SSEEvent("message", '{\n "a": 1}'),
        SSEEvent(None, ""),
        SSEEvent(None, "last"),
    ]


@pytest.mark.parametrize("line", ["<html>", "HTTP/1.1 200 OK", '{"a": 1}', "foo: bar"])
def test_sse_decoder_rejects_foreign_lines(line: str) -> None:
    with pytest.raises(SSEFormatError):
        SSEDecoder().feed_line(line)


def test_retry_after_forms() -> None:
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after": "0.5"}) == 0.5
    assert retry_after_seconds({"retry-after": "-3"}) == 0.0
    assert retry_after_seconds({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None
    future = email.utils.formatdate(time.time() + 60, usegmt=True)
    hinted = retry_after_seconds({"retry-after": future})
    assert hinted is not None and 50 < hinted <= 60
    past = email.utils.formatdate(time.time() - 60, usegmt=True)
    assert retry_after_seconds({"retry-after": past}) == 0.0


STREAM = b"".join(
    sse(
        ": keep-alive",
        chunk({"role": "assistant", "content": "", "reasoning_content": "Think "}),
        chunk({"reasoning_content": "hard. ✓"}),
        chunk({"content": "Héllo "}),
        chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "a", "function": {"name": "read", "arguments": '{"p":'}},
                    {"index": 1, "id": "b", "function": {"name": "ls", "arguments": "{}"}},
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": ' "ü"}'}}]}),
        chunk({}, finish="tool_calls"),
        chunk(usage={"prompt_tokens": 1, "completion_tokens": 2}),
    )
)
EXPECTED = Completion(
    text="Héllo ",
    reasoning="Think hard. ✓",
    tool_calls=(ToolCall("a", "read", '{"p": "ü"}'), ToolCall("b", "ls", "{}")),
    usage=Usage(1, 2),
    finish_reason="tool_calls",
)


class _Pieces(httpx.AsyncByteStream):
    def __init__(self, pieces: list[bytes]) -> None:
        self._pieces = pieces

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self._pieces:
            yield piece


def _complete_over(pieces: list[bytes]) -> Completion:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=_Pieces(pieces)
        )

    async def run() -> Completion:
        async with OpenAICompatClient(
            base_url="http://fake/v1",
            api_key="k",
            model="m",
            transport=httpx.MockTransport(handler),
        ) as client:
            return await complete(client, ModelRequest(messages=[Message.user("hi")]))

    return asyncio.run(run())


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len(STREAM) - 1), max_size=12, unique=True))
def test_any_byte_split_assembles_the_same_completion(cuts: list[int]) -> None:
    bounds = [0, *sorted(cuts), len(STREAM)]
    pieces = [STREAM[a:b] for a, b in itertools.pairwise(bounds)]
    assert _complete_over(pieces) == EXPECTED


def test_crlf_line_endings() -> None:
    assert _complete_over([STREAM.replace(b"\n", b"\r\n")]) == EXPECTED
