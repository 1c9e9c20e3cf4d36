"""Glob patterns as ``glob`` and ``grep`` read them: braces, ``*``, ``?``, ``[...]``, ``**``.

A pattern is the model's, so nothing here may grow without bound: patterns are at most
:data:`MAX_GLOB_CHARS` long, brace alternatives are capped at :data:`MAX_ALTERNATIVES`
(``{a,b}`` twenty times over is a million patterns) and expanded by a loop rather than a
recursion, and matching never backtracks: a pattern such as ``*a*a*a…b``, which a regular
expression takes exponential time over, costs at most its length times the path's here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias, TypeVar

from tether.tools.fs._fence import FileToolError

T = TypeVar("T")
Item = TypeVar("Item")

MAX_GLOB_CHARS: Final = 4096
"""The longest glob pattern the tools take (expanding braces costs length times groups)."""
MAX_ALTERNATIVES: Final = 1000
"""The most patterns one glob's braces may expand to."""

_MAGIC = re.compile(r"[*?\[{]")


def expand_braces(pattern: str) -> list[str]:
    """``a.{py,pyi}`` → ``a.py``, ``a.pyi`` (nesting supported; an unclosed brace is literal);
    more than :data:`MAX_ALTERNATIVES` results is an error."""
    done: list[str] = []
    todo = [pattern]
    while todo:
        current = todo.pop()
        group = _first_group(current)
        if group is None:
            done.append(current)
            continue
        start, end = group
        head, tail = current[:start], current[end + 1 :]
        options = _split_top(current[start + 1 : end])
        # Pushed last-first so the alternatives come out in the order they were written.
        todo.extend(head + option + tail for option in reversed(options))
        if len(done) + len(todo) > MAX_ALTERNATIVES:
            raise FileToolError(
                f"the glob pattern {pattern} expands to more than {MAX_ALTERNATIVES} "
                "alternatives; use fewer {a,b} groups"
            )
    return done


def _first_group(pattern: str) -> tuple[int, int] | None:
    """Where the first closed top-level ``{...}`` of ``pattern`` starts and ends."""
    depth = 0
    start = -1
    for i, ch in enumerate(pattern):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                return start, i
    return None


def _split_top(body: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current = ""
    for ch in body:
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += ch == "{"
        depth -= ch == "}" and depth > 0
        current += ch
    parts.append(current)
    return parts


@dataclass(frozen=True, slots=True)
class _Class:
    """``[...]``: one character in (or, negated, not in) the listed characters and ranges."""

    negate: bool
    chars: frozenset[str]
    ranges: tuple[tuple[str, str], ...]

    def __call__(self, ch: str) -> bool:
        inside = ch in self.chars or any(low <= ch <= high for low, high in self.ranges)
        return inside != self.negate


_STAR: Final = "*"
_ANY: Final = "?"
_Token: TypeAlias = str | _Class
"""A name's pattern, token by token: :data:`_STAR`, :data:`_ANY`, a class, or a literal
character (as a one-character string; a literal ``*`` or ``?`` cannot occur in a pattern)."""


def _wildcard_match(
    tokens: Sequence[T], items: Sequence[Item], one: Callable[[T, Item], bool]
) -> bool:
    """Whether ``items`` match ``tokens``, where :data:`_STAR` matches any run of items and
    every other token exactly one (``one`` says whether it does).

    Greedy with one resume point (the last star): a later star never needs an earlier one to
    give items back, so the work is at most tokens times items, whatever the pattern.
    """
    t = i = 0
    star = -1
    resume = 0
    while i < len(items):
        if t < len(tokens) and tokens[t] == _STAR:
            star, resume = t, i
            t += 1
        elif t < len(tokens) and one(tokens[t], items[i]):
            t += 1
            i += 1
        elif star >= 0:
            resume += 1
            t, i = star + 1, resume
        else:
            return False
    while t < len(tokens) and tokens[t] == _STAR:
        t += 1
    return t == len(tokens)


def _one_char(token: _Token, ch: str) -> bool:
    if isinstance(token, _Class):
        return token(ch)
    return token in (_ANY, ch)


def _name_tokens(segment: str, shown: str) -> tuple[_Token, ...]:
    tokens: list[_Token] = []
    i = 0
    while i < len(segment):
        ch = segment[i]
        end = _class_close(segment, i) if ch == "[" else -1
        if end == -1:
            if not (ch == _STAR and tokens[-1:] == [_STAR]):  # "**" in a name is one star
                tokens.append(ch)
            i += 1
            continue
        tokens.append(_class(segment[i + 1 : end], shown))
        i = end + 1
    return tuple(tokens)


def _class_close(segment: str, start: int) -> int:
    """The index of the ``]`` closing the class that opens at ``start``, or -1 (then the
    ``[`` is literal). A ``]`` right after ``[`` or ``[!`` is a member, not the end."""
    j = start + 1
    if segment[j : j + 1] in ("!", "^"):
        j += 1
    if segment[j : j + 1] == "]":
        j += 1
    return segment.find("]", j)


def _class(body: str, shown: str) -> _Class:
    negate = body[:1] in ("!", "^")
    if negate:
        body = body[1:]
    chars: set[str] = set()
    ranges: list[tuple[str, str]] = []
    i = 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            low, high = body[i], body[i + 2]
            if low > high:
                raise FileToolError(
                    f"invalid glob pattern {shown}: bad character range {low}-{high}"
                )
            ranges.append((low, high))
            i += 3
        else:
            chars.add(body[i])
            i += 1
    return _Class(negate, frozenset(chars), tuple(ranges))


_ANY_NAMES: Final = "**"


@dataclass(frozen=True, slots=True)
class GlobMatcher:
    """A glob pattern (braces already expanded), ready to match ``/``-separated relative
    paths in time bounded by the pattern's length times the path's.

    ``*``, ``?`` and ``[...]`` stay within one component; ``**`` as a whole component spans
    any number of them (none included; one at least when it ends the pattern).
    """

    segments: tuple[tuple[_Token, ...] | str, ...]

    def fullmatch(self, rel: str) -> bool:
        return _wildcard_match(self.segments, rel.split("/"), _one_name)


def _one_name(segment: tuple[_Token, ...] | str, name: str) -> bool:
    if isinstance(segment, str):  # the "any one name" a final ** starts with
        return True
    return _wildcard_match(segment, name, _one_char)


def compile_glob(pattern: str, shown: str | None = None) -> GlobMatcher:
    """``pattern`` as a :class:`GlobMatcher`; an invalid one is a :class:`FileToolError`
    naming ``shown`` (the pattern as the model wrote it; default ``pattern``)."""
    parts = pattern.split("/")
    segments: list[tuple[_Token, ...] | str] = []
    for index, part in enumerate(parts):
        if part != _ANY_NAMES:
            segments.append(_name_tokens(part, shown or pattern))
        elif index == len(parts) - 1:
            segments += [_ANY, _STAR]
        elif segments[-1:] != [_STAR]:
            segments.append(_STAR)
    return GlobMatcher(tuple(segments))


def split_pattern(pattern: str) -> tuple[str, str]:
    """The literal leading directory of ``pattern`` and the wildcard rest.

    ``src/**/*.py`` → (``src``, ``**/*.py``); ``/etc/*.conf`` → (``/etc``, ``*.conf``).
    """
    parts = pattern.split("/")
    literal: list[str] = []
    for part in parts[:-1]:
        if _MAGIC.search(part):
            break
        literal.append(part)
    rest = parts[len(literal) :]
    base = "/".join(literal)
    if pattern.startswith("/") and not base:
        base = "/"
    return base, "/".join(rest)


__all__ = [
    "MAX_ALTERNATIVES",
    "MAX_GLOB_CHARS",
    "GlobMatcher",
    "compile_glob",
    "expand_braces",
    "split_pattern",
]
