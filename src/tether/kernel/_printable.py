"""Text tether did not write, made safe to show on a terminal: the one home of that rule.

A model, a child agent or a workspace file controls much of what tether prints (a command, a
justification, a path, assistant text, a tool result), and a terminal obeys what it prints: an
ANSI escape (``ESC [``, ``ESC ]`` for the window title, the C1 ``CSI`` U+009B) can erase or
rewrite a line, a carriage return or a backspace can overwrite one, a bidirectional override
can reorder one, a zero-width or non-ASCII space can hide what is there. Every such character
is shown as an escape instead: ``\\n``, ``\\r``, ``\\t``, ``\\x1b``, ``\\u202e``,
``\\U000e0001``. A character counts as such when Python does not call it printable: controls,
format characters, surrogates, private-use and unassigned code points, and every separator but
the ASCII space.

:func:`printable` is for a line (a field, a headline, a table cell): nothing in it can start a
new line. :func:`printable_block` is for text a surface lays out as a block (assistant text, a
tool result): it keeps line breaks and tabs, and escapes the rest.
"""

from __future__ import annotations

from typing import Final

_SHORT: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_BLOCK_KEEPS: Final = frozenset("\n\t")


def needs_escape(char: str) -> bool:
    """Whether a terminal could draw ``char`` as something else than itself, or act on it."""
    return not char.isprintable()


def escaped(char: str) -> str:
    """``char`` as the escape that shows it: ``\\n``, ``\\x1b``, ``\\u202e``, ``\\U000e0001``."""
    return _SHORT.get(char) or char.encode("unicode_escape").decode("ascii")


def printable(text: str) -> str:
    """``text`` on one line, with every character a terminal would not show as itself
    escaped, so what a model or a workspace file wrote is exactly what the user sees."""
    return "".join(escaped(c) if needs_escape(c) else c for c in text)


def printable_block(text: str) -> str:
    """``text`` as a block: line breaks (``\\r\\n`` read as ``\\n``) and tabs stay, every other
    character a terminal would not show as itself is escaped as in :func:`printable`."""
    return "".join(
        escaped(c) if needs_escape(c) and c not in _BLOCK_KEEPS else c
        for c in text.replace("\r\n", "\n")
    )


__all__ = ["escaped", "needs_escape", "printable", "printable_block"]
