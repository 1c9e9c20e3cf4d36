"""The session export format: a header line, then one event per line, for each session of a
delegation tree in turn (the root first, every child after its parent).

A session's first line is ``SessionHeader.to_dict()`` as JSON (``"type": "session"``, a type no
event has); the line ``n`` after it is the event with ``seq == n - 1`` as ``Event.to_json()``.
One session's part is exactly the JSONL backend's ``session.jsonl``, so an export of a session
without children moves between stores and tools without conversion.

Reading validates the whole file before anything is stored: a half-imported session would be a
log whose committed facts (a ``sandbox/mode`` switch, an approval) silently went missing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from tether.errors import TetherError
from tether.session._events import Event
from tether.session._header import SessionHeader


class InvalidArchiveError(TetherError):
    """An import file is not a valid export; the message names the line and the problem."""

    code = "INVALID_IMPORT"


@dataclass(frozen=True, slots=True)
class Archive:
    header: SessionHeader
    events: tuple[Event, ...]


def header_line(header: SessionHeader) -> str:
    return json.dumps(header.to_dict(), separators=(",", ":"), ensure_ascii=False)


def export_lines(header: SessionHeader, events: Iterable[Event]) -> Iterator[str]:
    """The export, one line per item, each ending in ``\\n``."""
    yield header_line(header) + "\n"
    for event in events:
        yield event.to_json() + "\n"


def parse_archive(data: bytes, source: str) -> list[Archive]:
    """Validate a whole export (one session or a tree); raise :class:`InvalidArchiveError` at
    the first bad line.

    ``source`` names the file in messages (``dump.jsonl: line 7: seq 5 expected 6``). Every
    session after the first must be a delegated child of one before it, so an import restores
    a whole tree or nothing, never a child without its parent.
    """
    lines = _split_lines(data)
    if not lines:
        raise InvalidArchiveError(f"{source}: line 1: empty file, expected a session header")
    archives: list[Archive] = []
    header = _parse_header(lines[0], 1, source)
    events: list[Event] = []
    for index, raw in enumerate(lines[1:]):
        number = index + 2
        if _is_header(raw):
            archives.append(Archive(header, tuple(events)))
            header, events = _parse_header(raw, number, source), []
            _check_child(header, archives, number, source)
            continue
        event = _parse_event(raw, number, source)
        if event.seq != len(events):
            raise InvalidArchiveError(
                f"{source}: line {number}: seq {event.seq} expected {len(events)} "
                "(events must be contiguous from 0)"
            )
        events.append(event)
    archives.append(Archive(header, tuple(events)))
    return archives


def _is_header(raw: bytes) -> bool:
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return False  # _parse_event names the problem
    return isinstance(value, dict) and value.get("type") == "session"


def _check_child(header: SessionHeader, before: list[Archive], number: int, source: str) -> None:
    ids = {archive.header.id for archive in before}
    if header.id in ids:
        raise InvalidArchiveError(f"{source}: line {number}: session {header.id} appears twice")
    if header.delegation_depth == 0 or header.parent_session not in ids:
        raise InvalidArchiveError(
            f"{source}: line {number}: session {header.id} is not a subagent of a session "
            "earlier in the file (an export holds one session and its descendants)"
        )


def _split_lines(data: bytes) -> list[bytes]:
    # A final newline ends the last line; it does not start an empty one.
    if not data:
        return []
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return [line[:-1] if line.endswith(b"\r") else line for line in lines]


def _decode(raw: bytes, number: int, source: str) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InvalidArchiveError(
            f"{source}: line {number}: not UTF-8 text (byte {err.start + 1})"
        ) from err
    if not text.strip():
        raise InvalidArchiveError(f"{source}: line {number}: empty line")
    return text


def _parse_header(raw: bytes, number: int, source: str) -> SessionHeader:
    text = _decode(raw, number, source)
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as err:
        raise InvalidArchiveError(
            f"{source}: line {number}: header is not valid JSON: {err}"
        ) from err
    try:
        return SessionHeader.from_dict(value)
    except TetherError as err:
        raise InvalidArchiveError(f"{source}: line {number}: {err.code}: {err}") from err


def _parse_event(raw: bytes, number: int, source: str) -> Event:
    text = _decode(raw, number, source)
    try:
        return Event.from_json(text)
    except TetherError as err:
        raise InvalidArchiveError(f"{source}: line {number}: {err.code}: {err}") from err


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")
