"""Models configured by name: ``[model]`` and ``[models.NAME]`` in ``tether.toml``.

The user's configuration file (``<config dir>/tether.toml``, :func:`user_config_path`) and a
workspace's ``tether.toml`` (once trusted, :mod:`tether.kernel._workspace_trust`) may both
configure models::

    [model]
    default = "work"                  # a name below, or KIND:TARGET

    [models.work]
    model = "deepseek:deepseek-chat"
    thinking = "enabled"
    reasoning_effort = "high"
    context_window = 128000
    timeout = 300                     # seconds of silence before MODEL_TIMEOUT (default 120)
    connect_timeout = 10              # seconds to connect (default 30)

An API key is only ever read from the environment, and is sent only where it belongs
(``docs/models.md``, "Where an API key goes"): a provider's variable (``DEEPSEEK_API_KEY``) to
that provider's host (its default, or the ``*_BASE_URL`` variable); a model with its own
``base_url`` gets the key its own ``api_key_env`` names, or none. A workspace cannot name
``api_key_env`` or ``headers`` at all: an agent that can write the file could otherwise pair
any of the user's secrets with any host.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Unpack

import httpx
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, field_validator

from tether.kernel._config import read_user_config, user_config_path
from tether.kernel._printable import printable
from tether.kernel._workspace_trust import UsedConfig
from tether.model._client import ModelClient
from tether.model._help import MODEL_SPEC_HELP
from tether.model._openai_compat import PRESETS, ClientOptions, OpenAICompatClient, ProviderPreset
from tether.model._openai_wire import Thinking, ToolCallContent, WireOptions
from tether.model._prices import Price, known_price
from tether.model._scripted import ScriptedModel
from tether.model._spec import ModelSpec, parse_model_spec
from tether.model._types import ModelError

_NAME: Final = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
_VARIABLE: Final = r"^[A-Za-z_][A-Za-z0-9_]*$"
_HEADER: Final = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"
_OWNED_BODY_KEYS: Final = ("model", "messages", "tools", "stream")
DEFAULT_READ_TIMEOUT: Final = 120.0
"""Seconds a model server may stay silent before a request fails (``timeout``)."""
DEFAULT_CONNECT_TIMEOUT: Final = 30.0
"""Seconds to wait for a model server to accept a connection (``connect_timeout``)."""
_WORKSPACE_REFUSED: Final = {
    "api_key_env": "which environment variable is sent as an API key",
    "headers": "request headers",
}


class ModelPrice(BaseModel):
    """``price = {input = N, output = N}``: US dollars per million tokens (``_prices.py``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0, allow_inf_nan=False)
    output: float = Field(ge=0, allow_inf_nan=False)


class ModelProfile(BaseModel):
    """One ``[models.NAME]`` table."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(min_length=1)
    """``KIND:TARGET``, as ``--model`` takes it."""
    base_url: str | None = Field(default=None, min_length=1)
    api_key_env: str | None = Field(default=None, pattern=_VARIABLE)
    headers: dict[str, str] = Field(default_factory=dict)
    body: dict[str, JsonValue] = Field(default_factory=dict)
    context_window: int | None = Field(default=None, gt=0)
    price: ModelPrice | None = None
    timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Seconds the server may stay silent (before its answer, or between two pieces of a
    stream) before the request fails ``MODEL_TIMEOUT`` (default
    :data:`DEFAULT_READ_TIMEOUT`)."""
    connect_timeout: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Seconds to wait for a connection (default :data:`DEFAULT_CONNECT_TIMEOUT`)."""
    stream: bool = True
    thinking: Thinking | None = None
    reasoning_effort: str | None = Field(default=None, min_length=1, max_length=32)
    tool_call_content: ToolCallContent = "empty"
    send_reasoning: bool | None = None
    """Default: the provider's (on for DeepSeek, off for other OpenAI-compatible servers)."""

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            if re.fullmatch(_HEADER, name) is None:
                raise ValueError(f"{name!r} is not a header name")
            if any(not ch.isprintable() for ch in text):
                raise ValueError(f"the value of header {name!r} has a control character")
        return value

    @field_validator("body")
    @classmethod
    def _body(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        owned = [key for key in _OWNED_BODY_KEYS if key in value]
        if owned:
            raise ValueError(
                f"{', '.join(owned)} {'is' if len(owned) == 1 else 'are'} set by tether "
                "(use model and stream instead)"
            )
        return value

    def wire(self, stream: bool | None, preset: ProviderPreset) -> WireOptions:
        return WireOptions(
            stream=self.stream if stream is None else stream,
            tool_call_content=self.tool_call_content,
            send_reasoning=(
                preset.sends_reasoning if self.send_reasoning is None else self.send_reasoning
            ),
            thinking=self.thinking,
            reasoning_effort=self.reasoning_effort,
        )


class _DefaultTable(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    default: str | None = Field(default=None, min_length=1)


class _Sections(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    model: _DefaultTable = Field(default_factory=_DefaultTable)
    models: dict[str, ModelProfile] = Field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ConfiguredModel:
    """A named model and the file that configured it."""

    name: str
    profile: ModelProfile
    source: str
    from_workspace: bool


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """Every configured model, and the default (a name or a spec) with the file that set it."""

    default: str | None = None
    default_source: str | None = None
    models: Mapping[str, ConfiguredModel] = field(default_factory=dict)


def load_model_config(
    env: Mapping[str, str] | None = None, used: UsedConfig | None = None
) -> ModelConfig:
    """The user's models, then those of ``used`` (the configuration a composition uses: the
    workspace's trusted ``tether.toml``, or a file the caller named). A default set by
    ``used`` wins over the user's. Raises ``MODEL_CONFIG`` for an invalid or refused table."""
    sources: list[tuple[str, Mapping[str, object], bool]] = []
    path = user_config_path(env)
    user = read_user_config(env)
    if user is not None:
        sources.append((str(path), user.model_extra or {}, False))
    if used is not None:
        sources.append((used.key, used.config.model_extra or {}, used.in_workspace))
    return model_config_from(sources, user_file=path)


def model_config_from(
    sources: Sequence[tuple[str, Mapping[str, object], bool]], *, user_file: Path | None = None
) -> ModelConfig:
    """Merge ``(source, top-level table, from_workspace)`` in order (see
    :func:`load_model_config`); ``user_file`` is named where a workspace's table is refused."""
    default: str | None = None
    default_source: str | None = None
    models: dict[str, ConfiguredModel] = {}
    for source, table, from_workspace in sources:
        sections = _parse(source, table)
        for name, profile in sections.models.items():
            where = f"{printable(source)}: models.{printable(name)}"
            if re.fullmatch(_NAME, name) is None:
                raise ModelError(
                    f"{where}: a model's name is letters, digits, '.', '_' and '-' (no ':', "
                    "which marks KIND:TARGET)",
                    code="MODEL_CONFIG",
                )
            if from_workspace:
                _refuse_credentials(where, profile, user_file or user_config_path())
            if name in models:
                raise ModelError(
                    f"{where}: {printable(models[name].source)} already configures a model "
                    f"named {name!r}; give one of them another name",
                    code="MODEL_CONFIG",
                )
            models[name] = ConfiguredModel(name, profile, source, from_workspace)
        if sections.model.default is not None:
            default, default_source = sections.model.default, source
    return ModelConfig(default, default_source, models)


def _parse(source: str, table: Mapping[str, object]) -> _Sections:
    try:
        return _Sections.model_validate(table)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ModelError(
            f"{printable(source)}: {printable(where)}: {printable(first['msg'])}",
            code="MODEL_CONFIG",
        ) from None


def _refuse_credentials(where: str, profile: ModelProfile, user_file: Path) -> None:
    for key, what in _WORKSPACE_REFUSED.items():
        if key in profile.model_fields_set:
            raise ModelError(
                f"{where}.{key}: a workspace's tether.toml cannot choose {what}: an agent "
                "that can write the file could send your secrets to any host. Configure this "
                f"model in your own file, {printable(str(user_file))}, instead",
                code="MODEL_CONFIG",
            )


@dataclass(frozen=True, slots=True)
class ChosenModel:
    """The model a composition would use: what was asked for, where that came from, and its
    settings (defaults for a bare ``KIND:TARGET``)."""

    name: str
    origin: str
    spec: ModelSpec
    profile: ModelProfile
    configured: ConfiguredModel | None = None


def choose_model(
    spec: str | None = None,
    env: Mapping[str, str] | None = None,
    config: ModelConfig | None = None,
) -> ChosenModel:
    """``spec`` (a configured model's name or ``KIND:TARGET``), else ``env["TETHER_MODEL"]``,
    else ``config``'s default. Raises ``MODEL_CONFIG`` when there is none or it is invalid."""
    environ: Mapping[str, str] = os.environ if env is None else env
    config = config or ModelConfig()
    chosen, origin = spec, "model spec"
    if chosen is None or not chosen.strip():
        chosen, origin = environ.get("TETHER_MODEL", ""), "TETHER_MODEL value"
    if not chosen.strip() and config.default is not None:
        chosen = config.default
        origin = f"default model in {printable(config.default_source or '')}"
    name = chosen.strip()
    if not name:
        raise ModelError(f"no model configured.\n{MODEL_SPEC_HELP}", code="MODEL_CONFIG")
    configured = config.models.get(name)
    if configured is not None:
        where = f"model of models.{configured.name} in {printable(configured.source)}"
        parsed = parse_model_spec(configured.profile.model, origin=where)
        return ChosenModel(name, origin, parsed, configured.profile, configured)
    if ":" not in name:
        known = ", ".join(sorted(config.models)) or "none"
        raise ModelError(
            f"invalid {origin} {chosen!r}: not KIND:TARGET and not a configured model "
            f"(configured: {known}; did you mean deepseek:{name} or openai:{name}?)\n"
            f"{MODEL_SPEC_HELP}",
            code="MODEL_CONFIG",
        )
    return ChosenModel(
        name, origin, parse_model_spec(chosen, origin=origin), ModelProfile(model=name)
    )


def resolve_model(
    spec: str | None = None,
    env: Mapping[str, str] | None = None,
    *,
    config: ModelConfig | None = None,
    stream: bool | None = None,
    read_timeout: float | None = None,
    **client_options: Unpack[ClientOptions],
) -> ModelClient:
    """The client for :func:`choose_model`'s choice.

    ``env`` defaults to ``os.environ``; ``stream`` overrides the model's configured streaming
    (``--no-stream``) and ``read_timeout`` its ``timeout`` (``--model-timeout``).
    ``client_options`` go to :class:`OpenAICompatClient` (e.g.
    ``timeout``, ``max_retries``, ``transport``) and are ignored for scripted models. Errors
    are :class:`ModelError`: ``MODEL_CONFIG`` for a missing or invalid spec or name or a
    missing API key, ``MODEL_SCRIPT`` for a bad script file.
    """
    environ: Mapping[str, str] = os.environ if env is None else env
    chosen = choose_model(spec, environ, config)
    profile = chosen.profile
    configured = Price(profile.price.input, profile.price.output) if profile.price else None
    if chosen.spec.kind == "scripted":
        scripted = ScriptedModel.from_path(
            chosen.spec.target, context_window=profile.context_window
        )
        scripted.price = configured
        return scripted
    preset = PRESETS[chosen.spec.kind]
    read = read_timeout if read_timeout is not None else profile.timeout
    options: ClientOptions = {
        "timeout": httpx.Timeout(
            read if read is not None else DEFAULT_READ_TIMEOUT,
            connect=profile.connect_timeout or DEFAULT_CONNECT_TIMEOUT,
        ),
        "wire": profile.wire(stream, preset),
        "context_window": profile.context_window,
        "extra_headers": profile.headers,
        "extra_body": profile.body,
        **client_options,
    }
    client = OpenAICompatClient.from_preset(
        preset,
        chosen.spec.target,
        environ,
        base_url=profile.base_url,
        api_key_env=profile.api_key_env,
        **options,
    )
    client.price = configured or known_price(preset.name, chosen.spec.target)
    return client


__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_READ_TIMEOUT",
    "ChosenModel",
    "ConfiguredModel",
    "ModelConfig",
    "ModelProfile",
    "choose_model",
    "load_model_config",
    "model_config_from",
    "resolve_model",
    "user_config_path",
]
