"""Lossless-JSON payloads: validation at append, deep freezing, and thawing for storage.

Event payloads must survive a store round trip unchanged, so only values that JSON represents
exactly are accepted. The error names the offending field so a plugin author can find it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TypeAlias

from tether.errors import TetherError

JsonValue: TypeAlias = (
    bool | int | float | str | Sequence["JsonValue"] | Mapping[str, "JsonValue"] | None
)
JsonObject: TypeAlias = Mapping[str, JsonValue]


class PayloadError(TetherError):
    """An event payload is not lossless JSON."""

    code = "INVALID_PAYLOAD"


def freeze(value: object, path: str = "data") -> JsonValue:
    """Validate ``value`` as lossless JSON and return a deeply immutable copy.

    Objects become read-only mappings and arrays become tuples, so an appended event cannot be
    changed through a reference the caller kept.
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        _check_text(value, path)
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise PayloadError(f"{path}: {value!r} is not representable in JSON")
        if value == 0.0 and math.copysign(1.0, value) < 0:
            raise PayloadError(f"{path}: -0.0 does not survive a JSON round trip")
        return value
    if isinstance(value, Mapping):
        out: dict[str, JsonValue] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise PayloadError(f"{path}: key {key!r} is not a string")
            _check_text(key, path)
            out[key] = freeze(item, f"{path}.{key}")
        return MappingProxyType(out)
    if isinstance(value, list | tuple):
        return tuple(freeze(item, f"{path}[{i}]") for i, item in enumerate(value))
    raise PayloadError(f"{path}: {type(value).__name__} is not a JSON type")


def freeze_object(value: object, path: str = "data") -> JsonObject:
    """Like :func:`freeze`, but the top level must be an object."""
    if not isinstance(value, Mapping):
        raise PayloadError(f"{path}: must be a JSON object, got {type(value).__name__}")
    try:
        frozen = freeze(value, path)
    except RecursionError:
        # A cyclic payload would otherwise surface as a bare RecursionError from deep inside.
        raise PayloadError(f"{path}: nested too deeply or contains a cycle") from None
    assert isinstance(frozen, Mapping)
    return frozen


def _check_text(text: str, path: str) -> None:
    # A lone surrogate (from ``errors="surrogateescape"`` decoding, say) has no UTF-8 form, so
    # the event could be appended but never stored: refuse it here, where the field is known.
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise PayloadError(
            f"{path}: string contains a lone surrogate at index {err.start} (not valid Unicode)"
        ) from None


def thaw(value: JsonValue) -> object:
    """Plain ``dict``/``list`` copy of a frozen value, ready for ``json.dumps``."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [thaw(v) for v in value]
    return value
