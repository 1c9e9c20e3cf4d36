"""Why a confined hook command could not be run: the sandbox hides its program.

A hook command runs confined (``sh -c COMMAND`` under the session's sandbox), where hidden
paths (``~/.ssh``, the session store, tether's data directory, ...) do not exist. A hook whose
script, or whose script's interpreter, lies there exits 126 or 127 ("not found") with nothing
to say why; this names the path and the hidden path that covers it, so the user can move the
script rather than debug a missing file that is plainly on disk.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator, Mapping
from typing import Final

from tether.sandbox._paths import PathRules

NOT_RUN_STATUSES: Final = frozenset({126, 127})
"""The shell's "cannot execute" and "not found"."""


def hidden_program(command: str, env: Mapping[str, str], rules: PathRules) -> str | None:
    """The problem to report for ``command`` when a program it names is hidden, else ``None``."""
    for path in _programs(command, env):
        covering = rules.hiding(os.path.realpath(path))
        if covering is not None:
            return (
                f"the sandbox hides {path} from hook commands (it lies in the hidden path "
                f"{covering}), so the command could not run it; keep hook scripts and their "
                "interpreters outside hidden paths"
            )
    return None


def _programs(command: str, env: Mapping[str, str]) -> Iterator[str]:
    """Each path-like word of ``command`` (variables and ``~`` expanded with the hook's
    environment), then the interpreter of each such script's ``#!`` line."""
    try:
        words = shlex.split(command)
    except ValueError:
        return
    for word in words:
        expanded = os.path.expanduser(_expand(word, env))
        if "/" not in expanded:
            continue
        yield expanded
        interpreter = _shebang(expanded)
        if interpreter is not None:
            yield interpreter


def _expand(word: str, env: Mapping[str, str]) -> str:
    for name, value in sorted(env.items(), key=lambda item: -len(item[0])):
        word = word.replace(f"${{{name}}}", value).replace(f"${name}", value)
    return word


def _shebang(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            first = handle.readline(256)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    parts = first[2:].decode("utf-8", "replace").split()
    return parts[0] if parts and parts[0].startswith("/") else None
