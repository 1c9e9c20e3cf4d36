"""The tool schemas a model request advertises, as the model layer's :class:`ToolSchema`.

:meth:`~tether.tools._pipeline.ToolRuntime.schemas` builds the schemas once for each set of
tools and returns the same tuple while that set stands; this turns each such tuple into
:class:`ToolSchema` values once, so a request costs a lookup, not a schema per tool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from tether.model import ToolSchema
from tether.session import JsonValue

Advertised = tuple[tuple[str, str, Mapping[str, JsonValue]], ...]

_KEPT: Final = 32
"""Tuples converted and kept (the oldest goes first), as many as a runtime keeps."""

_converted: dict[int, tuple[Advertised, tuple[ToolSchema, ...]]] = {}
"""``id(schemas)`` -> the tuple itself (held, so the id stays its own) and its conversion."""


def advertised(schemas: Advertised) -> tuple[ToolSchema, ...]:
    """``schemas`` (from :meth:`ToolRuntime.schemas`) as :class:`ToolSchema` values."""
    found = _converted.get(id(schemas))
    if found is not None and found[0] is schemas:
        return found[1]
    converted = tuple(ToolSchema(name, text, parameters) for name, text, parameters in schemas)
    _converted[id(schemas)] = (schemas, converted)
    while len(_converted) > _KEPT:
        del _converted[next(iter(_converted))]
    return converted


__all__ = ["advertised"]
