"""The one text that tells a user how to choose a model (shared by spec and presets)."""

from __future__ import annotations

from typing import Final

MODEL_SPEC_HELP: Final = (
    "Choose a model with --model SPEC, the TETHER_MODEL environment variable, or a default "
    "in tether.toml:\n"
    "  scripted:PATH    a scripted model file (offline and deterministic)\n"
    "  openai:MODEL     an OpenAI-compatible API; needs OPENAI_API_KEY, "
    "optional OPENAI_BASE_URL\n"
    "  deepseek:MODEL   DeepSeek, e.g. deepseek:deepseek-chat; needs DEEPSEEK_API_KEY, "
    "optional DEEPSEEK_BASE_URL\n"
    "  NAME             a model configured as [models.NAME] in tether.toml (docs/models.md)"
)
