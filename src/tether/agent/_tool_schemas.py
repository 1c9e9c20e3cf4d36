"""The tool schemas a model request advertises, as the model layer's :class:`ToolSchema`.

:meth:`~tether.tools._pipeline.ToolRuntime.schemas` builds each tool's entry once and returns
the same entry while the tool stands as it was; this turns each such entry into a
:class:`ToolSchema` once, so a request costs a lookup per tool, not a schema.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from tether.model import ToolSchema
from tether.tools._pipeline import AdvertisedTool

_KEPT: Final = 1024
"""Entries converted and kept (the oldest goes first): every tool a thousand children see,
their shared tools and one of each child's own, fits."""

_converted: dict[int, tuple[AdvertisedTool, ToolSchema]] = {}
"""``id(entry)`` -> the entry itself (held, so the id stays its own) and its conversion."""


def advertised(schemas: Sequence[AdvertisedTool]) -> tuple[ToolSchema, ...]:
    """``schemas`` (from :meth:`ToolRuntime.schemas`) as :class:`ToolSchema` values."""
    out = []
    for entry in schemas:
        found = _converted.get(id(entry))
        if found is None or found[0] is not entry:
            found = _converted[id(entry)] = (entry, ToolSchema(*entry))
            while len(_converted) > _KEPT:
                del _converted[next(iter(_converted))]
        out.append(found[1])
    return tuple(out)


__all__ = ["advertised"]
