"""The context window a model claims: the known defaults, a configured override, the scripted
model's own, and a malformed one refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tether.model import KNOWN_CONTEXT_WINDOWS, ModelError, OpenAICompatClient, ScriptedModel
from tether.model._context_window import context_window_of
from tether.model._settings import model_config_from, resolve_model

KEYS = {"DEEPSEEK_API_KEY": "sk-d", "OPENAI_API_KEY": "sk-o"}


@pytest.mark.parametrize(
    ("spec", "window"),
    [
        ("deepseek:deepseek-chat", 128_000),
        ("deepseek:deepseek-reasoner", 128_000),
        ("openai:gpt-4.1", 1_047_576),
        ("openai:gpt-4o-mini", 128_000),
        ("openai:qwen2.5-coder", None),
    ],
)
async def test_the_models_tether_names_have_known_windows(spec: str, window: int | None) -> None:
    client = resolve_model(spec, KEYS)
    assert isinstance(client, OpenAICompatClient)
    assert (client.context_window, context_window_of(client)) == (window, window)
    await client.aclose()


async def test_a_configured_window_overrides_the_known_one(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"context_window": 9_000, "agents": [{"steps": [{"text": "x"}]}]}))
    models = model_config_from(
        [
            (
                "tether.toml",
                {
                    "models": {
                        "small": {"model": "deepseek:deepseek-chat", "context_window": 32_000},
                        "test": {"model": f"scripted:{script}", "context_window": 500},
                    }
                },
                False,
            )
        ]
    )
    client = resolve_model("small", KEYS, config=models)
    assert isinstance(client, OpenAICompatClient)
    assert client.context_window == 32_000
    await client.aclose()
    assert context_window_of(resolve_model("test", KEYS, config=models)) == 500
    assert context_window_of(resolve_model(f"scripted:{script}", KEYS)) == 9_000
    assert KNOWN_CONTEXT_WINDOWS["deepseek"]["deepseek-chat"] == 128_000


def test_a_script_without_a_window_claims_none() -> None:
    model = ScriptedModel.from_dict({"agents": [{"steps": [{"text": "x"}]}]})
    assert (model.context_window, context_window_of(model)) == (None, None)


class NoWindow:
    context_window = True


def test_a_client_without_a_usable_window_has_none() -> None:
    assert context_window_of(object()) is None
    assert context_window_of(NoWindow()) is None


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (0, "context_window: Input should be greater than 0"),
        ("big", "context_window: Input should be a valid integer"),
    ],
)
def test_a_malformed_script_window_is_refused(value: Any, reason: str) -> None:
    with pytest.raises(ModelError) as info:
        ScriptedModel.from_dict({"context_window": value, "agents": [{"steps": [{"text": "x"}]}]})
    assert info.value.code == "MODEL_SCRIPT"
    assert str(info.value) == f"invalid scripted model file <dict>: {reason}"
