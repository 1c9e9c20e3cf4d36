"""Choosing and building a configured model (``tether.model._settings``): which choice wins,
per-provider defaults, and the refusals a workspace's table gets."""

from __future__ import annotations

from typing import Any

import pytest

from tether.model import Message, ModelError, ModelRequest, OpenAICompatClient, ToolCall
from tether.model._client import complete
from tether.model._settings import ModelConfig, choose_model, model_config_from, resolve_model

from .fake_openai import FakeOpenAI, Reply, chunk, json_error, sse

USER = "/home/u/.config/tether/tether.toml"


def config(*sources: tuple[str, dict[str, Any], bool]) -> ModelConfig:
    return model_config_from(sources)


def test_the_flag_wins_then_tether_model_then_the_last_files_default() -> None:
    models = config(
        (USER, {"model": {"default": "mine"}, "models": {"mine": {"model": "openai:a"}}}, False),
        ("tether.toml", {"model": {"default": "deepseek:b"}}, True),
    )
    assert choose_model("openai:c", {"TETHER_MODEL": "mine"}, models).name == "openai:c"
    chosen = choose_model(None, {"TETHER_MODEL": "mine"}, models)
    assert (chosen.name, str(chosen.spec), chosen.origin) == (
        "mine",
        "openai:a",
        "TETHER_MODEL value",
    )
    chosen = choose_model(None, {}, models)
    assert (chosen.name, chosen.origin) == ("deepseek:b", "default model in tether.toml")


def test_an_unknown_name_lists_the_configured_ones() -> None:
    models = config((USER, {"models": {"work": {"model": "openai:a"}}}, False))
    with pytest.raises(ModelError) as info:
        choose_model("wrok", {}, models)
    assert str(info.value).splitlines()[0] == (
        "invalid model spec 'wrok': not KIND:TARGET and not a configured model (configured: "
        "work; did you mean deepseek:wrok or openai:wrok?)"
    )


def test_a_workspace_base_url_is_allowed_but_keyless() -> None:
    models = config(
        (
            "tether.toml",
            {"models": {"local": {"model": "deepseek:x", "base_url": "http://h"}}},
            True,
        )
    )
    client = resolve_model("local", {"DEEPSEEK_API_KEY": "sk-secret"}, config=models)
    assert isinstance(client, OpenAICompatClient)
    assert (client.base_url, client.api_key_env, client.base_url_env) == ("http://h", None, None)
    assert "Authorization" not in client._headers


async def test_reasoning_goes_back_to_deepseek_by_default_and_elsewhere_when_asked(
    server: FakeOpenAI,
) -> None:
    reply = sse(chunk({"content": "ok"}), chunk({}, finish="stop"))
    history = [
        Message.user("go"),
        Message.assistant(tool_calls=[ToolCall("c1", "ls", "{}")], reasoning="think"),
        Message.tool("c1", "a"),
    ]
    env = {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": server.base_url}
    env |= {"DEEPSEEK_API_KEY": "k", "DEEPSEEK_BASE_URL": server.base_url}
    models = config(
        (USER, {"models": {"echo": {"model": "openai:m", "send_reasoning": True}}}, False)
    )
    sent: list[Any] = []
    for spec in ("openai:m", "deepseek:m", "echo"):
        server.add(Reply(pieces=reply))
        client = resolve_model(spec, env, config=models)
        assert isinstance(client, OpenAICompatClient)
        async with client:
            await complete(client, ModelRequest(messages=history))
        sent.append(server.requests[-1].body["messages"][1].get("reasoning_content"))
    assert sent == [None, "think", "think"]


async def test_a_keyless_base_url_refused_by_its_server_says_no_key_was_sent(
    server: FakeOpenAI,
) -> None:
    server.add(json_error(401, "Missing bearer token"))
    models = config(
        (USER, {"models": {"gw": {"model": "openai:m", "base_url": server.base_url}}}, False)
    )
    client = resolve_model("gw", {"OPENAI_API_KEY": "sk-o"}, config=models)
    assert isinstance(client, OpenAICompatClient)
    async with client:
        with pytest.raises(ModelError) as info:
            await complete(client, ModelRequest(messages=[Message.user("hi")]))
    assert info.value.code == "MODEL_AUTH"
    assert str(info.value) == (
        f"openai ({server.base_url}/chat/completions) refused the API key (HTTP 401): Missing "
        "bearer token. No API key was sent: a model whose base_url is configured gets only the "
        "key its own api_key_env names, in your user configuration (docs/models.md)."
    )
    assert "authorization" not in server.requests[0].headers
