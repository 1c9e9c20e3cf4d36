"""How text that tether did not write is shown on one line without imitating tether's own.

Approval headlines (:mod:`tether.plugins.headline`) and ``tether approvals list`` show text a
model or a child wrote. Two kinds of characters could make it lie: the headline separator
``·`` and the characters a terminal draws like it, and invisible ones (controls, which also
drive terminals; format characters such as bidi overrides, zero-width and tag characters;
line and paragraph separators). They are shown as ``\\uXXXX`` escapes (``\\n``, ``\\r``,
``\\t`` for the common controls).
"""

from __future__ import annotations

import json
import unicodedata
from typing import Final

LOOKALIKES: Final = frozenset(
    "\u00b7\u0387\u16eb\u2022\u2027\u2219\u22c5\u2981\u2e31\u2e33\u30fb\u318d\ua78f\uff65"
)
"""The middle dot and the characters a terminal draws like it."""
INVISIBLE: Final = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
"""Unicode categories escaped everywhere: controls, format characters, surrogates, line and
paragraph separators."""
_SHORT: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(char: str) -> str:
    code = ord(char)
    if code > 0xFFFF:  # as a JSON surrogate pair, so a quoted field stays valid JSON
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def shown_in_full(text: str) -> str:
    """``text`` complete, with only its invisible characters escaped."""
    return "".join(
        (_SHORT.get(c) or _escape(c)) if unicodedata.category(c) in INVISIBLE else c for c in text
    )


def inert_json(text: str) -> str:
    """JSON text with look-alikes and invisible characters as ``\\uXXXX`` escapes (inside
    strings, the only place JSON allows them, they mean the same)."""
    return "".join(
        _escape(c) if c in LOOKALIKES or unicodedata.category(c) in INVISIBLE else c for c in text
    )


def quoted(text: str, limit: int) -> str:
    """Text someone else wrote, as a field: a JSON string literal cut at ``limit`` characters
    (then followed by ``…``)."""
    if len(text) <= limit:
        return inert_json(json.dumps(text, ensure_ascii=False))
    return inert_json(json.dumps(text[: limit - 1], ensure_ascii=False)) + "…"


__all__ = ["INVISIBLE", "LOOKALIKES", "inert_json", "quoted", "shown_in_full"]
