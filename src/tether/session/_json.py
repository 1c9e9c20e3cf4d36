"""Lossless-JSON payloads: validation at append, deep freezing, and thawing for storage.

Event payloads must survive a store round trip unchanged, so only values that JSON represents
exactly are accepted. The error names the offending field so a plugin author can find it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, TypeAlias, TypeGuard

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
    try:
        return freeze_plain(value)
    except NotPlain:
        return _freeze(value, path)


class NotPlain(Exception):
    """Raised by :func:`freeze_plain` at the first value it does not take: :func:`freeze`
    then decides, and names the field if it refuses."""


def freeze_plain(value: Any, depth: int = 0) -> JsonValue:
    """The fast path of :func:`freeze` for what JSON parsing produces (exact ``dict``,
    ``list``, ``str``, ``int``, ``float``, ``bool``, ``None``, and frozen payloads): the same
    result, with no field paths built and no ABC checks. It accepts only what :func:`_freeze`
    accepts, and raises :class:`NotPlain` for anything else, valid or not, and below
    :data:`_PLAIN_DEPTH` (where recursion limits, not values, decide)."""
    kind = type(value)
    if kind is dict or kind is MappingProxyType:
        if depth >= _PLAIN_DEPTH:
            raise NotPlain
        out: dict[str, JsonValue] = {}
        for key, item in value.items():
            if type(key) is not str:
                raise NotPlain
            if not key.isascii():
                _utf8(key)
            # Scalars inline: a call per value would cost as much as the rest.
            kind = type(item)
            if kind is str:
                if not item.isascii():
                    _utf8(item)
                out[key] = item
            elif kind is int or kind is bool or item is None:
                out[key] = item
            else:
                out[key] = freeze_plain(item, depth + 1)
        return MappingProxyType(out)
    if kind is list or kind is tuple:
        if depth >= _PLAIN_DEPTH:
            raise NotPlain
        return tuple([freeze_plain(item, depth + 1) for item in value])
    if kind is str:
        if not value.isascii():
            _utf8(value)
        text: str = value
        return text
    if kind is int or kind is bool or value is None:
        scalar: int | None = value
        return scalar
    if kind is float and math.isfinite(value) and (value or math.copysign(1.0, value) > 0):
        number: float = value
        return number
    raise NotPlain


_PLAIN_DEPTH: Final = 64
"""Containers nested deeper than this take the general path."""


def frozen_object(text: str) -> JsonObject | None:
    """The fast path of parsing ``text`` as JSON and freezing the object it holds (with
    :func:`freeze_plain`): the same frozen object, built as the parser goes, with nothing
    walked again; or ``None``, and the text must be parsed and frozen, which decide. Taken by
    an object's compact text with no arrays (the parser builds lists, which freeze as tuples),
    no ``\\u`` escape (the only way a lone surrogate gets into a parsed string), no brace
    beyond :data:`_PLAIN_DEPTH` and only finite floats that are not ``-0.0``; a text that
    merely looks otherwise (a ``[`` inside a string) just takes the slow path."""
    if (
        "[" in text
        or ("\\" in text and "\\u" in text)  # one character first: most texts escape nothing
        # Nesting beyond the depth takes five characters a level (``{"":`` and ``}``).
        or (len(text) > 4 * _PLAIN_DEPTH and text.count("{") > _PLAIN_DEPTH)
    ):
        return None
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return None
    try:
        value, end = _frozen_scan(text, 0)
    except (StopIteration, ValueError, RecursionError, NotPlain):
        return None
    if end != len(text) or type(value) is not MappingProxyType:
        return None
    frozen: JsonObject = value
    return frozen


def _plain_float(text: str) -> float:
    value = float(text)
    if math.isfinite(value) and (value or math.copysign(1.0, value) > 0):
        return value
    raise NotPlain


def _no_constant(name: str) -> object:
    raise NotPlain


_frozen_scan: Callable[[str, int], tuple[object, int]] = json.JSONDecoder(  # type: ignore[attr-defined]
    object_hook=MappingProxyType, parse_float=_plain_float, parse_constant=_no_constant
).scan_once


def _utf8(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise NotPlain from None


def _freeze(value: object, path: str) -> JsonValue:
    """The general path: any ``Mapping`` and sequence type, and the field path in errors."""
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
            out[key] = _freeze(item, f"{path}.{key}")
        return MappingProxyType(out)
    if isinstance(value, list | tuple):
        return tuple(_freeze(item, f"{path}[{i}]") for i, item in enumerate(value))
    raise PayloadError(f"{path}: {type(value).__name__} is not a JSON type")


def freeze_object(value: object, path: str = "data") -> JsonObject:
    """Like :func:`freeze`, but the top level must be an object."""
    if value.__class__ is dict:  # the usual payload: no ABC check
        try:
            frozen_dict: JsonObject = freeze_plain(value)  # type: ignore[assignment]
        except (NotPlain, RecursionError):
            pass  # the general path decides, and names the field
        else:
            return frozen_dict
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


def is_mapping(value: object) -> TypeGuard[JsonObject]:
    """``isinstance(value, Mapping)`` for a value of a payload (so a mapping is an object of
    it), answered without the ABC machinery (a Python-level ``__instancecheck__`` per call)
    for what payloads are made of: frozen objects and ``dict``s are mappings, JSON's other
    values are not."""
    kind = type(value)
    if kind is MappingProxyType or kind is dict:
        return True
    if kind in _NOT_MAPPINGS:
        return False
    return isinstance(value, Mapping)


_NOT_MAPPINGS: Final = frozenset({str, int, float, bool, type(None), tuple, list})


def thaw(value: JsonValue) -> object:
    """Plain ``dict``/``list`` copy of a frozen value, ready for ``json.dumps``."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if is_mapping(value):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [thaw(v) for v in value]
    return value
