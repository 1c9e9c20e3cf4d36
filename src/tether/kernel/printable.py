"""Text from outside tether (workspace files, the paths they name) made safe to show.

A workspace file is the agents' to write, and a terminal obeys what it prints: an ANSI escape
can erase a line, a carriage return can overwrite one, a bidirectional override can reorder
one. Whatever tether shows a user to decide on goes through :func:`printable` first.
"""

from __future__ import annotations


def printable(text: str) -> str:
    """``text`` with every character a terminal would not show as itself escaped (control
    characters, ANSI escapes, bidirectional overrides, zero-width characters), so what a
    workspace file says is exactly what the user sees."""
    return "".join(
        ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text
    )


__all__ = ["printable"]
