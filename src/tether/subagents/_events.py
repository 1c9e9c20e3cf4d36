"""The subagents layer's event payloads: one typed definition per event type it writes.

The layer writes one event type, ``subagent/descriptor`` (version 2, model-hidden): how a
child was created, so its parent and a cold resume can tell what it is. One-shot descriptors
carry ``{version, mode: "one-shot", provider, label?}``; continuable ones add ``persona?`` and
``tool_filter?`` so a cold resume recomposes the child exactly as it was created.

Its readers are lenient on purpose and use :meth:`Descriptor.parse`: a descriptor of another
version, or one this version cannot read, is no descriptor (the child is shown and resumed as
one without it) rather than an error that would hide the whole lineage. So the definition
has no failing reader.

:class:`ToolFilter` lives here because its JSON form is part of the descriptor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Final, Literal, Self

from tether.session import JsonObject, JsonValue

DESCRIPTOR_VERSION: Final = 2
DescriptorMode = Literal["one-shot", "continuable"]
"""``one-shot``: runs one task and is disposed. ``continuable``: resumable by its parent."""

_FIELDS: Final = frozenset({"version", "mode", "provider", "label", "persona", "tool_filter"})


@dataclass(frozen=True, slots=True)
class ToolFilter:
    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()

    def to_json(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        if self.allow is not None:
            out["allow"] = list(self.allow)
        if self.deny:
            out["deny"] = list(self.deny)
        return out

    @classmethod
    def from_json(cls, raw: object) -> ToolFilter | None:
        if not isinstance(raw, Mapping):
            return None
        allow = raw.get("allow")
        deny = raw.get("deny", ())
        return cls(
            tuple(str(x) for x in allow) if isinstance(allow, Sequence) else None,
            tuple(str(x) for x in deny) if isinstance(deny, Sequence) else (),
        )


@dataclass(frozen=True, slots=True)
class Descriptor:
    """``subagent/descriptor {version, mode, provider, label?, persona?, tool_filter?}``:
    ``provider`` is the tool that created the child; ``persona`` and ``tool_filter`` are
    stored for continuable children only."""

    TYPE: ClassVar[str] = "subagent/descriptor"
    mode: DescriptorMode
    provider: str
    label: str | None = None
    persona: str | None = None
    tool_filter: ToolFilter | None = None

    @classmethod
    def parse(cls, data: JsonObject) -> Self | None:
        """``None`` for a different version, unknown fields, or a malformed value."""
        if data.get("version") != DESCRIPTOR_VERSION or set(data) - _FIELDS:
            return None
        mode, provider, label = data.get("mode"), data.get("provider"), data.get("label")
        persona = data.get("persona")
        if mode not in ("one-shot", "continuable") or not isinstance(provider, str):
            return None
        if label is not None and not isinstance(label, str):
            return None
        if persona is not None and not isinstance(persona, str):
            return None
        return cls(
            mode,
            provider,
            label,
            persona,
            ToolFilter.from_json(data.get("tool_filter")),
        )

    def to_data(self) -> JsonObject:
        data: dict[str, JsonValue] = {
            "version": DESCRIPTOR_VERSION,
            "mode": self.mode,
            "provider": self.provider,
        }
        if self.label is not None:
            data["label"] = self.label
        if self.mode == "continuable":
            if self.persona is not None:
                data["persona"] = self.persona
            if self.tool_filter is not None:
                data["tool_filter"] = self.tool_filter.to_json()
        return data


__all__ = [
    "DESCRIPTOR_VERSION",
    "Descriptor",
    "DescriptorMode",
    "ToolFilter",
]
