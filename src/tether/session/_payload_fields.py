"""Typed reads of one field of a stored event payload, for the layers' event definitions
(``policy/_events.py``, ``agent/_events.py``, ``plugins/hooks/_events.py``).

A field that does not fit raises the owning layer's own error, so each layer keeps its stable
code (``INVALID_POLICY_EVENT``, ``INVALID_AGENT_EVENT``, ``INVALID_HOOK_EVENT``) while the rule
for what fits lives here once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeGuard

from tether.session._json import JsonObject, JsonValue, is_mapping


def is_count(value: object) -> TypeGuard[int]:
    """An integer that is not a bool (``True`` is an ``int`` subclass, not a count)."""
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class PayloadFields:
    """Field readers that raise ``error(message)`` for a payload that does not fit."""

    error: Callable[[str], Exception]

    def bad(self, event_type: str, key: str, want: str, value: object) -> Exception:
        return self.error(f"{event_type} payload: {key!r} must be {want}, got {value!r}")

    def text(self, data: JsonObject, event_type: str, key: str) -> str:
        value = data.get(key)
        if not isinstance(value, str):
            raise self.bad(event_type, key, "a string", value)
        return value

    def optional_text(self, data: JsonObject, event_type: str, key: str) -> str | None:
        return None if data.get(key) is None else self.text(data, event_type, key)

    def integer(self, data: JsonObject, event_type: str, key: str) -> int:
        value = data.get(key)
        if not is_count(value):
            raise self.bad(event_type, key, "an integer", value)
        return value

    def optional_integer(self, data: JsonObject, event_type: str, key: str) -> int | None:
        return None if data.get(key) is None else self.integer(data, event_type, key)

    def boolean(self, data: JsonObject, event_type: str, key: str) -> bool:
        value = data.get(key)
        if not isinstance(value, bool):
            raise self.bad(event_type, key, "a boolean", value)
        return value

    def mapping(self, data: JsonObject, event_type: str, key: str) -> JsonObject:
        value = data.get(key)
        if not is_mapping(value):
            raise self.bad(event_type, key, "an object", value)
        return value

    def items(self, data: JsonObject, event_type: str, key: str) -> Sequence[JsonValue]:
        value = data.get(key)
        if not isinstance(value, list | tuple):
            raise self.bad(event_type, key, "a list", value)
        return value


__all__ = ["PayloadFields", "is_count"]
