"""Model output made valid Unicode before anything above the model layer sees it.

JSON can carry a lone surrogate (``"\\ud800"``), which Python decodes into a ``str`` that has
no UTF-8 form: a session log cannot store it, and a terminal cannot print it. Every stream
type (:mod:`tether.model._types`) passes its text through :func:`valid_text`, so no adapter,
built in or third-party, can hand one upward.
"""

from __future__ import annotations

import json
import re
from typing import Final

REPLACEMENT: Final = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def valid_text(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD; a high and low surrogate side by
    side (a character whose halves came in two pieces) is joined into that character."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def valid_arguments(arguments: str) -> str:
    """Tool-call ``arguments`` (JSON text) whose decoded strings are valid Unicode: a lone
    surrogate written as a ``\\ud800`` escape would otherwise reach the tool and its result.
    Arguments that do not parse are left to the tool pipeline, which reports them."""
    arguments = valid_text(arguments)
    if _ESCAPE.search(arguments) is None:
        return arguments
    try:
        value = json.loads(arguments)
        cleaned = _clean(value)
    except (ValueError, RecursionError):
        return arguments
    return arguments if cleaned == value else json.dumps(cleaned, ensure_ascii=False)


def _clean(value: object) -> object:
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, list):
        return [_clean(item) for item in value]
    if isinstance(value, dict):
        return {valid_text(str(key)): _clean(item) for key, item in value.items()}
    return value


__all__ = ["REPLACEMENT", "valid_arguments", "valid_text"]
