"""Programs that configuration runs outside the sandbox and an agent must not rewrite.

Workspace trust (``kernel/_workspace_trust.py``) checks the configuration files a run reads,
not the programs they name. An approver (``approver_command``) decides approvals outside any
sandbox: if its program is a file an agent may write (a script anywhere in a writable
workspace), the agent rewrites it once and answers its own questions, in this run and every
later one. So each word of such a command that names an existing regular file inside the
workspace must name one under a control path (``.claude/``, the workspace's ``tether.toml``,
``protected_paths``: readable by agents, never writable) or the harness's own code; anything
else is refused with ``REWRITABLE_PROGRAM``. (Hooks need no such check: they run confined, and
a hook's ``allow`` never overrides another decision, so a rewritten hook widens nothing.)

The check reads words: the command's own and, for a word holding a shell string
(``sh -c './approve.sh --strict'``), that string's words; a script reached only through a
further indirection (a script that runs another) is not seen, which
``docs/guide-permissions.md`` says.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Iterator, Sequence

from tether.sandbox._errors import SandboxError
from tether.sandbox._paths import PathRules, below, canonical, harness_paths


def command_words(command: str) -> list[str]:
    """The words of shell string ``command`` (operators such as ``&&`` and ``;`` split them).
    A string the shell lexer cannot split gives its plain whitespace-separated words."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # an unbalanced quote: the shell refuses it too; check what is there
        return command.split()


def _candidates(
    words: Sequence[str], cwd: str, search_path: str | None, *, nested: bool = False
) -> Iterator[str]:
    for index, word in enumerate(words):
        if not word:
            continue
        if not nested and any(c.isspace() for c in word):
            yield from _candidates(command_words(word), cwd, search_path, nested=True)
            continue
        if index == 0 and "/" not in word:
            found = shutil.which(word, path=search_path)
            if found is not None:
                yield found
            continue
        # ``--script=./x`` names ``./x`` too.
        for part in (word, word.partition("=")[2]):
            if part:
                yield os.path.join(cwd, os.path.expanduser(part))


def rewritable_programs(
    words: Sequence[str],
    *,
    cwd: str,
    workspace: str,
    rules: PathRules,
    search_path: str | None = None,
) -> list[str]:
    """The files among ``words`` (run from ``cwd``; the first word looked up on
    ``search_path`` as the shell would) that lie inside ``workspace`` where a confined
    command may write: not a control path, not the harness's own code. Canonical, in order,
    each once."""
    root = os.path.realpath(workspace)
    kept = canonical(harness_paths())
    found: list[str] = []
    for candidate in _candidates(words, cwd, search_path):
        real = os.path.realpath(candidate)
        if real in found or not os.path.isfile(real) or not below(real, root):
            continue
        if rules.controls(real, root) or any(below(real, k) for k in kept):
            continue
        found.append(real)
    return found


def refuse_rewritable(
    what: str,
    words: Sequence[str],
    *,
    cwd: str,
    workspace: str,
    rules: PathRules,
    search_path: str | None = None,
) -> None:
    """Raise ``REWRITABLE_PROGRAM`` naming ``what`` (``"the approver"``) when
    :func:`rewritable_programs` finds any."""
    files = rewritable_programs(
        words, cwd=cwd, workspace=workspace, rules=rules, search_path=search_path
    )
    if files:
        listed = ", ".join(shlex.quote(f) for f in files)
        raise SandboxError(
            f"{what} runs {listed}, inside the workspace {os.path.realpath(workspace)} where an "
            "agent may rewrite it and so decide its own approvals; move it outside the "
            "workspace, or under .claude/ or a path listed in the sandbox's protected_paths "
            "(agents can read those but never write them)",
            code="REWRITABLE_PROGRAM",
        )


__all__ = ["command_words", "refuse_rewritable", "rewritable_programs"]
