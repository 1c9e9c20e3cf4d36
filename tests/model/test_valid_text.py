"""Model output made valid Unicode in the stream types, whichever adapter built them."""

from __future__ import annotations

import json

from tether.model import (
    Completion,
    Message,
    ModelRequest,
    OpenAICompatClient,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallDelta,
)
from tether.model._client import complete
from tether.model._valid_text import valid_arguments, valid_text

from .fake_openai import FakeOpenAI, Reply, chunk, sse


def test_lone_surrogates_become_replacement_characters_and_split_pairs_are_joined() -> None:
    assert valid_text("plain") == "plain"
    assert valid_text("caf\u00e9 \U0001f600") == "caf\u00e9 \U0001f600"
    assert valid_text("a\ud800b\udcffc") == "a\ufffdb\ufffdc"
    assert valid_text("\ud83d" + "\ude00") == "\U0001f600"
    assert valid_text("\ude00\ud83d") == "\ufffd\ufffd"


def test_arguments_are_cleaned_inside_their_json_and_otherwise_left_alone() -> None:
    escaped = json.dumps({"path": "x\ud800", "list": ["\udcff", 1], "\ud800": True})
    assert valid_arguments(escaped) == '{"path": "x\ufffd", "list": ["\ufffd", 1], "\ufffd": true}'
    assert valid_arguments('{"path": "\\\\ud800"}') == '{"path": "\\\\ud800"}'  # a backslash
    assert valid_arguments('{"a": "\\ud83d\\ude00"}') == '{"a": "\\ud83d\\ude00"}'  # a pair
    assert (
        valid_arguments('{"bad": "\\ud800"') == '{"bad": "\\ud800"'
    )  # not JSON: the pipeline says so
    assert valid_arguments("[" * 100_000 + "\\ud800") == "[" * 100_000 + "\\ud800"


def test_every_stream_type_holds_valid_text() -> None:
    assert TextDelta("a\ud800").text == "a\ufffd"
    assert ReasoningDelta("r\udcff").text == "r\ufffd"
    delta = ToolCallDelta(0, "i\ud800", "n\ud800", '{"p": "\ud800')
    assert (delta.id, delta.name, delta.arguments_delta) == ("i\ufffd", "n\ufffd", '{"p": "\ufffd')
    call = ToolCall("i\ud800", "ls", '{"path": "\\ud800"}')
    assert (call.id, call.arguments) == ("i\ufffd", '{"path": "\ufffd"}')
    done = Completion(text="t\ud800", reasoning="r\ud800", tool_calls=(call,))
    assert (done.text, done.reasoning) == ("t\ufffd", "r\ufffd")


async def test_the_openai_client_hands_up_valid_text(server: FakeOpenAI) -> None:
    server.add(
        Reply(
            pieces=sse(
                chunk({"role": "assistant", "content": "half \ud83d"}),
                chunk({"content": "\ude00 lone \ud800"}),
                chunk(finish="stop"),
            )
        )
    )
    client = OpenAICompatClient(base_url=server.base_url, api_key="k", model="m", max_retries=0)
    try:
        request = ModelRequest(messages=[Message.user("hi")])
        completion = await complete(client, request)
    finally:
        await client.aclose()
    # A character whose halves came in two deltas is whole again in the completion.
    assert completion.text == "half \U0001f600 lone \ufffd"
