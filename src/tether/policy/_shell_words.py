"""What a ``bash`` command string says, as far as permission rules need it: the one home of the
two readings a command rule takes (``docs/guide-permissions.md``, "What a command rule
covers").

- :func:`plain_words`, for what *allows* (an ``allow`` rule, a grant): the command's words when
  it is one plain command, else ``None``. Plain means it has none of the characters through
  which a shell runs more than one command or more than the words show: ``;`` ``&`` ``|``
  (lists, pipes, background), `````` and ``$`` (command and parameter substitution), ``<``
  ``>`` (redirections, process substitution), ``(`` ``)`` ``{`` ``}`` (subshells, groups,
  brace expansion), ``\\`` (escapes, line continuation), ``#`` (comments), and no line break,
  control or format character at all. Quotes are allowed and read as the shell reads them (an
  unclosed one is not plain). So a prefix ``npm test`` covers ``npm test --watch`` and never
  ``npm test; rm -rf ~``, ``npm test && curl … | sh``, ``npm test $(…)``, ``npm test > x``
  or ``npm test`` followed by a newline and anything.
- :func:`command_segments`, for what *refuses or asks* (a ``deny`` or ``ask`` rule): every
  simple command the string may run, read generously: split at every operator, substitution
  and grouping character (inside quotes too: splitting too often only makes a ``deny`` match
  more), with leading ``VAR=value`` words dropped, a program's directory dropped (``/bin/rm``
  is ``rm``), after a wrapper command (``sudo``, ``env``, ``command``, ``exec``, ``nohup``,
  ``nice``, ``time``, ``timeout``, ``xargs``, ``ionice``, ``taskset``, ``flock``, ``strace``,
  ``su``, ...) every later word tried as the program, and the string an ``sh -c``/``bash -lc``,
  ``eval``, ``env -S`` or ``su -c`` runs read the same way. This is a best effort: a shell can
  always spell a command so that no reading finds it (a variable holding its name, a script written
  first). A ``deny`` rule on commands is a guard against mistakes, not a boundary; the sandbox is
  the boundary.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import unicodedata
from typing import Final

UNSAFE_CHARACTERS: Final = frozenset(";&|`$<>(){}\\#\n\r")
"""Characters a plain command never contains (see the module docstring)."""

_SPLIT: Final = re.compile(r"\$\(|<\(|>\(|&&|\|\||[;&|`()\n\r{}]")
"""Where :func:`command_segments` cuts a command string."""

WRAPPERS: Final = frozenset(
    {"sudo", "doas", "env", "command", "builtin", "exec", "nohup", "nice", "time", "xargs",
     "stdbuf", "setsid", "timeout", "chroot", "unbuffer", "if", "elif", "then", "else", "while",
     "until", "do", "!",
     # programs that run the command their operands name (scheduling, limits, namespaces,
     # tracing, locks, other users)
     "ionice", "taskset", "chrt", "numactl", "prlimit", "flock", "unshare", "nsenter",
     "setpriv", "setarch", "systemd-run", "strace", "ltrace", "valgrind", "watch", "fakeroot",
     "eatmydata", "firejail", "su", "runuser", "pkexec", "sg", "script"}
)  # fmt: skip
"""Words that run the words after them (or, for the compound commands' keywords and ``!``,
start a command inside one): a ``deny`` rule looks past them."""

SHELLS: Final = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "busybox"})
STRING_OPTION_RUNNERS: Final = frozenset({"su", "runuser", "script", "flock"})
"""Programs whose ``-c``/``--command`` value is a string a shell runs (``su -c 'rm x'``)."""
RUNNERS: Final = WRAPPERS | SHELLS | {"eval", "source", ".", "trap", "coproc"}
"""Programs (and shell words) whose arguments name the command that really runs, or a string
a shell runs: a prefix of them (``timeout 5``, ``sudo``, ``bash -c``, ``trap``) would cover
every command."""
_MAX_DEPTH: Final = 3
"""How many ``sh -c`` / ``eval`` levels :func:`command_segments` reads into."""


def _is_control(ch: str) -> bool:
    if ch in (" ", "\t"):
        return False
    return unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn")


@functools.lru_cache(maxsize=256)
def plain_words(command: str) -> tuple[str, ...] | None:
    """The words of ``command`` when it is one plain command, else ``None`` (see the module
    docstring for what plain means)."""
    if any(ch in UNSAFE_CHARACTERS or _is_control(ch) for ch in command):
        return None
    try:
        words = shlex.split(command, posix=True)
    except ValueError:  # an unclosed quote
        return None
    return tuple(words) if words else None


def _words(segment: str) -> list[str]:
    try:
        return shlex.split(segment, posix=True)
    except ValueError:
        return segment.split()


_ASSIGNMENT: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _candidates(words: list[str]) -> list[tuple[str, ...]]:
    """The commands one simple command's words may run: without leading assignments, the
    program's directory dropped; after a wrapper, every later word may be the program (its
    options and their values are not known here, so each is tried)."""
    i = 0
    while i < len(words) and _ASSIGNMENT.match(words[i]):
        i += 1
    rest = words[i:]
    if not rest:
        return []
    program = os.path.basename(rest[0]) or rest[0]
    found = [(program, *rest[1:])]
    if program in WRAPPERS:
        for start in range(1, len(rest)):
            found += _candidates(rest[start:])
    return found


_SHELL_OPTION_VALUES: Final = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})
"""A shell's options whose value is the next word (never its command string)."""


def _shell_string(words: tuple[str, ...]) -> str | None:
    """The string a shell's words run (``sh -c 'x'``, ``bash -lc 'x'``, ``sh -e -c 'x'``): with
    ``c`` in an option cluster, the first word after the options."""
    at, command = 1, False
    while at < len(words) and words[at].startswith(("-", "+")):
        word = words[at]
        command = command or (word[0] == "-" and not word.startswith("--") and "c" in word)
        at += 2 if word in _SHELL_OPTION_VALUES else 1
    return words[at] if command and at < len(words) else None


def _after_option(words: tuple[str, ...], names: tuple[str, ...]) -> str | None:
    """The word after the first of ``names`` (``env -S 'x y'``), or that option's own value
    (``--split-string=x``)."""
    for at, word in enumerate(words[1:], 1):
        if word in names:
            return words[at + 1] if at + 1 < len(words) else None
        for name in names:
            if word.startswith(name + "=") or (len(name) == 2 and word.startswith(name)):
                return word[len(name) :].removeprefix("=") or None
    return None


@functools.lru_cache(maxsize=256)
def command_segments(command: str, _depth: int = 0) -> tuple[tuple[str, ...], ...]:
    """Every simple command ``command`` may run, as words (see the module docstring). Kept for
    the last commands read: every rule of a call reads the same string."""
    found: list[tuple[str, ...]] = []
    for part in _SPLIT.split(command):
        for words in dict.fromkeys(_candidates(_words(part))):
            found.append(words)
            if _depth >= _MAX_DEPTH:
                continue
            inner: str | None = None
            if words[0] in SHELLS:
                inner = _shell_string(words)
            elif words[0] == "eval":
                inner = " ".join(words[1:])
            elif words[0] == "env":
                inner = _after_option(words, ("-S", "--split-string"))
            elif words[0] in STRING_OPTION_RUNNERS:
                inner = _after_option(words, ("-c", "--command")) or _shell_string(words)
            if inner:
                found += command_segments(inner, _depth + 1)
    return tuple(found)


@functools.lru_cache(maxsize=256)
def segment_programs(command: str) -> frozenset[str]:
    """The programs (first words) of :func:`command_segments`, to rule most rules out at once."""
    return frozenset(words[0] for words in command_segments(command))


def runs_another_command(words: tuple[str, ...]) -> bool:
    """Whether a plain command's first word is not the program that runs: an assignment
    (``FOO=1 make``) or one of :data:`RUNNERS` (``env``, ``timeout 5``, ``sh -c``). A
    prefix rule made of its first words would then cover any program."""
    return bool(words) and (
        _ASSIGNMENT.match(words[0]) is not None
        or (os.path.basename(words[0]) or words[0]) in RUNNERS
    )


def starts_with(words: tuple[str, ...], prefix: tuple[str, ...]) -> bool:
    return len(words) >= len(prefix) and words[: len(prefix)] == prefix


__all__ = [
    "RUNNERS",
    "SHELLS",
    "STRING_OPTION_RUNNERS",
    "UNSAFE_CHARACTERS",
    "WRAPPERS",
    "command_segments",
    "plain_words",
    "runs_another_command",
    "segment_programs",
    "starts_with",
]
