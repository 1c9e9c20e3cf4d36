"""The system prompt (stable sections) and the runtime-context snapshot (dynamic facts).

Sections render into ``request/header.system``; a new header is logged only when it changes.
Contexts render into one ``user/message`` snapshot placed after the claimed prompt and before
``request/header``; a new snapshot is appended only when its text differs from the retained
one, so the prompt prefix stays cache-stable across policy switches (the entries and their
order: ``docs/design.md`` §4).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from tether.kernel import PromptRegistry
from tether.session import Event, HasSession, JsonValue, Session

SNAPSHOT_HEAD: Final = (
    "Current runtime context. This snapshot supersedes earlier runtime-context snapshots."
)
SNAPSHOT_NONE: Final = (
    "Current runtime context: none. This snapshot supersedes earlier runtime-context snapshots."
)
SNAPSHOT_PLUGIN: Final = "system-prompt"


def is_snapshot(event: Event) -> bool:
    source = event.data.get("source")
    return (
        event.type == "user/message"
        and isinstance(source, Mapping)
        and source.get("form") == "snapshot"
    )


def retained_snapshot(session: Session) -> Event | None:
    for event in reversed(session.events):
        if is_snapshot(event):
            return event
    return None


def render_snapshot(
    registry: PromptRegistry, agent: HasSession | None
) -> tuple[str, list[dict[str, str]]]:
    parts = registry.render("context", agent)
    sections = [{"name": name, "text": text} for name, text in parts]
    if not parts:
        return "", sections
    return "\n\n".join([SNAPSHOT_HEAD, *(text for _, text in parts)]), sections


def append_snapshot_if_changed(
    session: Session, registry: PromptRegistry, agent: HasSession | None
) -> None:
    text, sections = render_snapshot(registry, agent)
    retained = retained_snapshot(session)
    retained_text = retained.data.get("content") if retained is not None else None
    if not text:
        if retained is None or retained_text == SNAPSHOT_NONE:
            return
        text = SNAPSHOT_NONE
    elif text == retained_text:
        return
    source: dict[str, JsonValue] = {
        "kind": "plugin",
        "plugin": SNAPSHOT_PLUGIN,
        "form": "snapshot",
        "sections": sections,
    }
    session.append("user/message", {"content": text, "source": source}, surface_op="append")


def render_system(registry: PromptRegistry, agent: HasSession | None) -> tuple[str, list[str]]:
    parts = registry.render("section", agent)
    return "\n\n".join(text for _, text in parts), [name for name, _ in parts]


def append_header_if_changed(session: Session, system: str, tools: list[str]) -> None:
    header: dict[str, JsonValue] = {"system": system, "tools": tools}
    last = session.last("request/header")
    if last is not None:
        previous = last.data.get("header")
        if (
            isinstance(previous, Mapping)
            and previous.get("system") == system
            and list(
                previous.get("tools", ())  # type: ignore[arg-type]
            )
            == tools
        ):
            return
    reason = "initial" if last is None else "change"
    session.append("request/header", {"header": header, "reason": reason})
