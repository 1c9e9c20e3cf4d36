"""A strict server-sent-events line decoder.

Strict on purpose: the SSE spec tells a browser to ignore unknown field lines, but a model
client that did so would turn an HTML error page served with status 200 into an empty stream.
Here any line that is not ``data:``, ``event:``, ``id:``, ``retry:``, a ``:`` comment or blank
is a format error, except ``error:``: llama.cpp's server reports a failure after HTTP 200 as an
``error: {...}`` line, which becomes an event named ``error`` so its message reaches the user.
"""

from __future__ import annotations

from dataclasses import dataclass


class SSEFormatError(ValueError):
    """A line that cannot belong to an event stream."""

    def __init__(self, line: str) -> None:
        super().__init__(f"not a server-sent-events line: {line[:200]!r}")
        self.line = line


@dataclass(frozen=True, slots=True)
class SSEEvent:
    event: str | None
    data: str


class SSEDecoder:
    """Feed lines (without their line endings); get an :class:`SSEEvent` at each blank line."""

    def __init__(self) -> None:
        self._data: list[str] = []
        self._event: str | None = None
        self._first = True

    def feed_line(self, line: str) -> SSEEvent | None:
        if self._first:
            self._first = False
            line = line.removeprefix("\ufeff")
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if not colon and name not in ("data", "event", "id", "retry", "error"):
            raise SSEFormatError(line)
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "error":
            self._event = "error"
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name in ("id", "retry"):
            pass
        else:
            raise SSEFormatError(line)
        return None

    def flush(self) -> SSEEvent | None:
        """The pending event at end of input, if the stream did not end with a blank line."""
        return self._dispatch()

    def _dispatch(self) -> SSEEvent | None:
        if not self._data:
            self._event = None
            return None
        event = SSEEvent(self._event, "\n".join(self._data))
        self._data = []
        self._event = None
        return event
