"""How text that tether did not write is quoted as a field of a one-line headline.

Approval headlines (:mod:`tether.plugins._headline`) show text a model or a child wrote. Besides
the characters a terminal would not show as itself (escaped by the one rule of
:mod:`tether.kernel._printable`), the headline separator ``·`` and the characters a terminal
draws like it could make such a field imitate tether's own. Inside a JSON string literal, the
only place they are quoted, all of them are shown as ``\\uXXXX`` escapes, which JSON reads back
as the same characters: the field stays exact JSON.
"""

from __future__ import annotations

import json
from typing import Final

from tether.kernel._printable import needs_escape

LOOKALIKES: Final = frozenset(
    "\u00b7\u0387\u16eb\u2022\u2027\u2219\u22c5\u2981\u2e31\u2e33\u30fb\u318d\ua78f\uff65"
)
"""The middle dot and the characters a terminal draws like it."""


def _json_escape(char: str) -> str:
    code = ord(char)
    if code > 0xFFFF:  # as a JSON surrogate pair, so a quoted field stays valid JSON
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def inert_json(text: str) -> str:
    """JSON text with look-alikes and the characters a terminal would not show as themselves
    as ``\\uXXXX`` escapes (inside strings, the only place JSON allows them, they mean the
    same)."""
    return "".join(_json_escape(c) if c in LOOKALIKES or needs_escape(c) else c for c in text)


def quoted(text: str, limit: int) -> str:
    """Text someone else wrote, as a field: a JSON string literal cut at ``limit`` characters
    (then followed by ``…``)."""
    if len(text) <= limit:
        return inert_json(json.dumps(text, ensure_ascii=False))
    return inert_json(json.dumps(text[: limit - 1], ensure_ascii=False)) + "…"


__all__ = ["LOOKALIKES", "inert_json", "quoted"]
