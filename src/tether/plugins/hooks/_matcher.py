"""Claude Code matcher semantics (``docs/hooks.md``, "Events").

- absent, ``""`` or ``"*"`` match everything;
- a pattern made only of ``[A-Za-z0-9_|]`` is a literal alternation: ``"Edit|Write"`` matches
  exactly ``Edit`` or ``Write`` (so ``"mcp__lab"`` matches no ``mcp__lab__x`` tool, as in
  Claude Code);
- anything else is a regular expression, tested with ``re.search`` like Claude Code's
  ``RegExp.test`` (unanchored: ``"Notebook.*"`` matches ``NotebookEdit``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

_LITERAL: Final = re.compile(r"[A-Za-z0-9_|]+")


class InvalidMatcherError(ValueError):
    """A matcher that is neither a literal alternation nor a valid regular expression."""


@dataclass(frozen=True, slots=True)
class Matcher:
    """A compiled matcher. ``pattern`` keeps the configured text (``None`` when absent)."""

    pattern: str | None
    _names: frozenset[str] | None = field(default=None, repr=False)
    _regex: re.Pattern[str] | None = field(default=None, repr=False)

    @property
    def matches_all(self) -> bool:
        return self._names is None and self._regex is None

    def matches(self, name: str) -> bool:
        if self._names is not None:
            return name in self._names
        if self._regex is not None:
            return self._regex.search(name) is not None
        return True


def compile_matcher(pattern: str | None) -> Matcher:
    """Compile ``pattern``; raises :class:`InvalidMatcherError` for a broken regex."""
    if pattern is None or pattern in ("", "*"):
        return Matcher(pattern)
    if _LITERAL.fullmatch(pattern):
        return Matcher(pattern, _names=frozenset(p for p in pattern.split("|") if p))
    try:
        regex = re.compile(pattern)
    except re.error as err:
        raise InvalidMatcherError(
            f"matcher {pattern!r} is not a valid regular expression: {err}"
        ) from None
    return Matcher(pattern, _regex=regex)


__all__ = ["InvalidMatcherError", "Matcher", "compile_matcher"]
