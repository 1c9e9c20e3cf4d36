"""Model-chosen regular expressions, matched within a time budget.

A pattern that backtracks exponentially (``(a+)+$`` against a long run of ``a``) would spin
forever in Python's ``re``: its matcher holds the GIL, so the event loop starves and Ctrl-C
waits for it, and nothing can interrupt a match. ``grep`` matches with the ``regex`` package
instead, whose matches take a ``timeout`` and release the GIL on ``str`` subjects. Every match
gets at most :data:`MATCH_TIMEOUT`, and all the matches of one call share
:data:`SEARCH_BUDGET`; a pattern that exceeds either ends the call with
:class:`PatternTooExpensive`, which names the pattern, where it was being matched, and what
to use instead. ``regex`` looks at the clock at its own check points, so a match may overrun
its timeout a few times over before it stops; it does stop. (Glob patterns need none of this:
:mod:`tether.tools.fs._glob_pattern` matches them without backtracking.)

Compiling is bounded too: ``regex`` expands counted repetitions as it compiles (so
``((a{1000}){1000}){1000}`` would take hours and cannot be interrupted), so a pattern whose
repetitions expand past :data:`MAX_EXPANDED_SIZE` pieces is refused before it is compiled.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Final

import regex

from tether.tools.fs._fence import FileToolError

MATCH_TIMEOUT: Final = 1.0
"""Seconds one match (one line of one file) may take."""
SEARCH_BUDGET: Final = 30.0
"""Seconds all the matches of one call may take together."""
MAX_EXPANDED_SIZE: Final = 100_000
"""The most pieces a pattern's counted repetitions may expand to (about a quarter second of
compiling)."""

_COUNT = re.compile(r"\{(\d*)(?:,(\d*))?\}")
_MAX_COUNT_DIGITS: Final = 9


class PatternTooExpensive(FileToolError):
    """A model-chosen pattern ran past its matching budget."""

    code = "PATTERN_TOO_EXPENSIVE"


def compile_regex(pattern: str, *, ignore_case: bool = False) -> regex.Pattern[str]:
    """``pattern`` compiled in Python's ``re`` syntax (``regex``'s compatible version 0)."""
    if expanded_size(pattern) > MAX_EXPANDED_SIZE:
        raise PatternTooExpensive(
            f"the regular expression {pattern} is too large to compile: its counted "
            f"repetitions ({{m,n}}) expand to more than {MAX_EXPANDED_SIZE} pieces. Use "
            "smaller counts, or literal=true to search for the plain text."
        )
    flags = regex.VERSION0 | (regex.IGNORECASE if ignore_case else 0)
    try:
        return regex.compile(pattern, flags)
    except (regex.error, OverflowError, RecursionError) as err:
        raise FileToolError(f"invalid regular expression {pattern}: {err}") from err


def expanded_size(pattern: str) -> int:
    """An upper bound of how many pieces ``pattern`` compiles to: each character, escape or
    class is one, and a counted repetition multiplies what it repeats (a group included)."""
    totals = [0]  # one running total per open group
    last = 0  # the size of what a count right here would repeat
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "(":
            totals.append(0)
            last = 0
            i += 1
            continue
        if ch == ")" and len(totals) > 1:
            last = totals.pop()
            totals[-1] += last
            i += 1
            continue
        count = _COUNT.match(pattern, i) if ch == "{" else None
        if count is not None and (count.group(1) or count.group(2)):
            digits = count.group(2) or count.group(1)
            times = int(digits) if len(digits) <= _MAX_COUNT_DIGITS else 10**_MAX_COUNT_DIGITS
            totals[-1] += last * max(times - 1, 0)
            last *= times
            i = count.end()
            continue
        if ch == "\\":
            i += 2
        elif ch == "[":
            i = _class_end(pattern, i)
        else:
            i += 1
        totals[-1] += 1
        last = 1
    return sum(totals)


def _class_end(pattern: str, start: int) -> int:
    """The index after the character class that opens at ``start`` (or the pattern's end)."""
    i = start + 1
    if pattern[i : i + 1] == "^":
        i += 1
    if pattern[i : i + 1] == "]":
        i += 1
    while i < len(pattern) and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i + 1


@dataclass(slots=True)
class MatchBudget:
    """The time one call may spend matching ``pattern`` (as the model wrote it)."""

    pattern: str
    per_match: float = MATCH_TIMEOUT
    total: float = SEARCH_BUDGET
    _spent: float = field(default=0.0, init=False)

    def search(self, compiled: regex.Pattern[str], text: str, where: str) -> bool:
        """Whether ``compiled`` matches somewhere in ``text`` (``where`` names it)."""
        left = self.total - self._spent
        if left <= 0:
            raise self._exceeded(where, whole_call=True)
        timeout = min(self.per_match, left)
        start = time.monotonic()
        try:
            return compiled.search(text, timeout=timeout) is not None
        except TimeoutError:
            raise self._exceeded(where, whole_call=timeout < self.per_match) from None
        finally:
            self._spent += time.monotonic() - start

    def _exceeded(self, where: str, *, whole_call: bool) -> PatternTooExpensive:
        spent = (
            f"this call used up its {self.total:g} s matching budget (stopped at {where})"
            if whole_call
            else f"matching it against {where} took longer than {self.per_match:g} s"
        )
        return PatternTooExpensive(
            f"the regular expression {self.pattern} is too expensive: {spent}. Use a simpler "
            "pattern (nested repetition such as (a+)+ or (x|x)* backtracks exponentially), a "
            "narrower path or glob, or literal=true to search for the plain text."
        )


__all__ = [
    "MATCH_TIMEOUT",
    "MAX_EXPANDED_SIZE",
    "SEARCH_BUDGET",
    "MatchBudget",
    "PatternTooExpensive",
    "compile_regex",
    "expanded_size",
]
