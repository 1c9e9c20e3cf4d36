"""The system prompt (stable sections) and the runtime-context snapshot (dynamic facts).

Sections render into ``request/header.system``; a new header is logged only when it changes.
Contexts render into one ``user/message`` snapshot placed after the claimed prompt and before
``request/header``; a new snapshot is appended only when its text differs from the retained
one, so the prompt prefix stays cache-stable across policy switches (the entries and their
order: ``docs/design.md`` §4).
"""

from __future__ import annotations

from typing import Final

from tether.agent._events import RequestHeader, UserMessage
from tether.kernel._prompt import PromptRegistry
from tether.session import Event, HasSession, JsonValue, Session

SNAPSHOT_HEAD: Final = (
    "Current runtime context. This snapshot supersedes earlier runtime-context snapshots."
)
SNAPSHOT_NONE: Final = (
    "Current runtime context: none. This snapshot supersedes earlier runtime-context snapshots."
)
SNAPSHOT_PLUGIN: Final = "system-prompt"


def is_snapshot(event: Event) -> bool:
    return event.type == UserMessage.TYPE and UserMessage.parse(event.data).from_plugin(
        form="snapshot"
    )


class LatestSnapshot:
    """The newest runtime-context snapshot of a log, as a session's fold (``Session.fold``):
    finding it reads only the events appended since the last request, never the whole log."""

    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event: Event | None = None

    def feed(self, event: Event) -> None:
        if is_snapshot(event):
            self.event = event


def retained_snapshot(session: Session) -> Event | None:
    return session.fold(LatestSnapshot).event


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
    retained_text = UserMessage.parse(retained.data).content if retained is not None else None
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
    snapshot = UserMessage(text, source)
    session.append(snapshot.TYPE, snapshot.to_data(), surface_op="append")


def render_system(registry: PromptRegistry, agent: HasSession | None) -> tuple[str, list[str]]:
    parts = registry.render("section", agent)
    return "\n\n".join(text for _, text in parts), [name for name, _ in parts]


def append_header_if_changed(
    session: Session, system: str, tools: list[str], *, resuming: bool = False
) -> None:
    """Log the header when it first appears or changes; ``resuming`` (an agent's first request
    over a log it did not start) logs it as ``resume`` even when unchanged."""
    last = session.last(RequestHeader.TYPE)
    if resuming:
        header = RequestHeader(system, tuple(tools), "resume")
        session.append(header.TYPE, header.to_data())
        return
    previous = RequestHeader.parse(last.data) if last is not None else None
    if previous is not None and previous.system == system and list(previous.tools) == tools:
        return
    header = RequestHeader(system, tuple(tools), "initial" if last is None else "change")
    session.append(header.TYPE, header.to_data())
