"""Model specs (``--model`` / ``TETHER_MODEL``): ``KIND:TARGET``.

Resolving a spec, or a configured model's name, to a client is
:func:`tether.model._settings.resolve_model`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from tether.model._help import MODEL_SPEC_HELP
from tether.model._types import ModelError

SpecKind: TypeAlias = Literal["scripted", "openai", "deepseek"]
"""``scripted``: a script file; ``openai``: any OpenAI-compatible API; ``deepseek``: DeepSeek."""

_KINDS: dict[str, SpecKind] = {"scripted": "scripted", "openai": "openai", "deepseek": "deepseek"}

__all__ = ["MODEL_SPEC_HELP", "ModelSpec", "SpecKind", "parse_model_spec"]


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
