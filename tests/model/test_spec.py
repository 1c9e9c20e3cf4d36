"""resolve_model / parse_model_spec."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tether.model import (
    Message,
    ModelError,
    ModelRequest,
    ModelSpec,
    OpenAICompatClient,
    ScriptedModel,
    parse_model_spec,
)
from tether.model._client import complete
from tether.model._help import MODEL_SPEC_HELP
from tether.model._settings import resolve_model

from .fake_openai import FakeOpenAI, Reply, chunk, sse

OPTION_WORDS = [
    "scripted:PATH",
    "openai:MODEL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "deepseek:MODEL",
    "DEEPSEEK_API_KEY",
    "TETHER_MODEL",
]


def config_error(spec: str | None, env: dict[str, str]) -> str:
    with pytest.raises(ModelError) as info:
        resolve_model(spec, env)
    assert info.value.code == "MODEL_CONFIG"
    message = str(info.value)
    for word in OPTION_WORDS:
        assert word in message
    return message


def test_nothing_configured_names_every_option() -> None:
    assert "no model configured" in config_error(None, {})
    assert "no model configured" in config_error("  ", {"TETHER_MODEL": ""})


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("gpt-4o", "did you mean deepseek:gpt-4o or openai:gpt-4o?"),
        ("anthropic:claude", "expected one of scripted:, openai:, deepseek:"),
        ("scripted:", "scripted: needs a file path"),
        ("deepseek: ", "deepseek: needs a model name"),
    ],
)
def test_invalid_specs(spec: str, reason: str) -> None:
    message = config_error(spec, {"DEEPSEEK_API_KEY": "k"})
    assert f"invalid model spec {spec!r}" in message
    assert reason in message


def test_invalid_tether_model_says_where_it_came_from() -> None:
    assert "invalid TETHER_MODEL value 'nope'" in config_error(None, {"TETHER_MODEL": "nope"})


@pytest.mark.parametrize(
    ("spec", "variable"),
    [("deepseek:deepseek-chat", "DEEPSEEK_API_KEY"), ("openai:gpt-4o", "OPENAI_API_KEY")],
)
def test_missing_or_empty_key(spec: str, variable: str) -> None:
    for env in ({}, {variable: "  "}):
        message = config_error(spec, env)
        assert f"{spec} needs an API key in {variable}, which is not set" in message


def test_parse() -> None:
    assert parse_model_spec(" deepseek:deepseek-reasoner ") == ModelSpec(
        "deepseek", "deepseek-reasoner"
    )
    assert parse_model_spec("scripted:/a/b:c.json") == ModelSpec("scripted", "/a/b:c.json")
    assert str(ModelSpec("openai", "gpt-4o")) == "openai:gpt-4o"
    assert "TETHER_MODEL" in MODEL_SPEC_HELP


def test_presets_and_base_urls() -> None:
    deepseek = resolve_model("deepseek:deepseek-chat", {"DEEPSEEK_API_KEY": "k"})
    assert isinstance(deepseek, OpenAICompatClient)
    assert deepseek.url == "https://api.deepseek.com/chat/completions"
    assert (deepseek.model, deepseek.provider, deepseek.api_key_env) == (
        "deepseek-chat",
        "deepseek",
        "DEEPSEEK_API_KEY",
    )
    moved = resolve_model(
        "deepseek:deepseek-chat",
        {"DEEPSEEK_API_KEY": "k", "DEEPSEEK_BASE_URL": "https://proxy.example/ds/"},
    )
    assert isinstance(moved, OpenAICompatClient)
    assert moved.url == "https://proxy.example/ds/chat/completions"
    openai = resolve_model("openai:gpt-4o", {"OPENAI_API_KEY": "k"})
    assert isinstance(openai, OpenAICompatClient)
    assert openai.url == "https://api.openai.com/v1/chat/completions"
    local = resolve_model(
        "openai:qwen", {"OPENAI_API_KEY": "none", "OPENAI_BASE_URL": "http://127.0.0.1:8080/v1"}
    )
    assert isinstance(local, OpenAICompatClient)
    assert local.url == "http://127.0.0.1:8080/v1/chat/completions"


def test_tether_model_is_the_default_and_an_explicit_spec_wins(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": [{"steps": [{"text": "hi"}]}]}))
    env = {"TETHER_MODEL": f"scripted:{script}"}
    from_env = resolve_model(None, env)
    assert isinstance(from_env, ScriptedModel)
    assert from_env.source == str(script)
    explicit = resolve_model("deepseek:deepseek-chat", {**env, "DEEPSEEK_API_KEY": "k"})
    assert isinstance(explicit, OpenAICompatClient)


def test_bad_script_file_is_a_script_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError) as info:
        resolve_model(f"scripted:{tmp_path / 'missing.json'}", {})
    assert info.value.code == "MODEL_SCRIPT"
    assert "missing.json" in str(info.value)


async def test_resolved_client_streams_from_the_configured_server(server: FakeOpenAI) -> None:
    server.add(Reply(pieces=sse(chunk({"content": "pong"}), chunk({}, finish="stop"))))
    env = {"DEEPSEEK_API_KEY": "sk-ds", "DEEPSEEK_BASE_URL": server.base_url}
    client = resolve_model("deepseek:deepseek-chat", env, max_retries=0)
    assert isinstance(client, OpenAICompatClient)
    async with client:
        result = await complete(client, ModelRequest(messages=[Message.user("ping")]))
    assert result.text == "pong"
    assert server.requests[0].body["model"] == "deepseek-chat"
    assert server.requests[0].headers["authorization"] == "Bearer sk-ds"
