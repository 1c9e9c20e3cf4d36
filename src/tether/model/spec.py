"""Model specs (``--model`` / ``TETHER_MODEL``) and resolving them to a client."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from tether.model._help import MODEL_SPEC_HELP
from tether.model.client import ModelClient
from tether.model.openai_compat import PRESETS, OpenAICompatClient
from tether.model.scripted import ScriptedModel
from tether.model.types import ModelError

SpecKind: TypeAlias = Literal["scripted", "openai", "deepseek"]
"""``scripted``: a script file; ``openai``: any OpenAI-compatible API; ``deepseek``: DeepSeek."""

_KINDS: dict[str, SpecKind] = {"scripted": "scripted", "openai": "openai", "deepseek": "deepseek"}

__all__ = ["MODEL_SPEC_HELP", "ModelSpec", "SpecKind", "parse_model_spec", "resolve_model"]


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A parsed spec: ``kind`` and its target (a script path or a model name)."""

    kind: SpecKind
    target: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.target}"


def parse_model_spec(spec: str, *, origin: str = "model spec") -> ModelSpec:
    """Parse ``KIND:TARGET``; ``origin`` names where the spec came from in errors."""
    text = spec.strip()
    kind, colon, target = text.partition(":")
    target = target.strip()
    if not colon or kind not in _KINDS:
        hint = ""
        if not colon and text:
            hint = f" (did you mean deepseek:{text} or openai:{text}?)"
        raise ModelError(
            f"invalid {origin} {spec!r}: expected one of {', '.join(k + ':' for k in _KINDS)}"
            f"{hint}\n{MODEL_SPEC_HELP}",
            code="MODEL_CONFIG",
        )
    if not target:
        what = "a file path" if kind == "scripted" else "a model name"
        raise ModelError(
            f"invalid {origin} {spec!r}: {kind}: needs {what}\n{MODEL_SPEC_HELP}",
            code="MODEL_CONFIG",
        )
    return ModelSpec(kind=_KINDS[kind], target=target)


def resolve_model(
    spec: str | None = None,
    env: Mapping[str, str] | None = None,
    **client_options: Any,
) -> ModelClient:
    """The client for ``spec``, or for ``env["TETHER_MODEL"]`` when ``spec`` is empty.

    ``env`` defaults to ``os.environ``. ``client_options`` go to
    :class:`OpenAICompatClient` (e.g. ``timeout``, ``max_retries``, ``transport``) and are
    ignored for scripted models. Errors are :class:`ModelError`: ``MODEL_CONFIG`` for a
    missing or invalid spec or a missing API key, ``MODEL_SCRIPT`` for a bad script file.
    """
    environ: Mapping[str, str] = os.environ if env is None else env
    origin = "model spec"
    if spec is None or not spec.strip():
        spec = environ.get("TETHER_MODEL", "")
        origin = "TETHER_MODEL value"
        if not spec.strip():
            raise ModelError(f"no model configured.\n{MODEL_SPEC_HELP}", code="MODEL_CONFIG")
    parsed = parse_model_spec(spec, origin=origin)
    if parsed.kind == "scripted":
        return ScriptedModel.from_path(parsed.target)
    return OpenAICompatClient.from_preset(
        PRESETS[parsed.kind], parsed.target, environ, **client_options
    )
