"""``grep``: a regular expression over the text files under a path. Reads are not fenced."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from typing import Final

from pydantic import Field

from tether.signals import AbortSignal
from tether.tools.base import ToolArgs, ToolCall, ToolResult
from tether.tools.fs._common import SNIFF_BYTES, args_of, looks_binary, plural, run_blocking
from tether.tools.fs.fence import (
    PROTECTED_COMPONENT,
    FencePolicy,
    FileToolError,
    display_path,
    resolve_path,
)
from tether.tools.fs.listing import DEFAULT_MAX_VISITED, expand_braces, glob_regex

DEFAULT_MAX_MATCHES: Final = 500
MAX_LINE_CHARS: Final = 500
"""A matching line is cut here (minified files have megabyte lines)."""
MAX_FILE_BYTES: Final = 16 * 1024 * 1024
"""Larger files are skipped and counted."""


class GrepArgs(ToolArgs):
    pattern: str = Field(min_length=1, description="Regular expression (Python syntax).")
    path: str | None = Field(
        default=None, description="File or directory to search; default the workspace."
    )
    glob: str | None = Field(
        default=None,
        description="Only files matching this glob, e.g. `*.py` (a pattern with `/` matches "
        "the path relative to `path`).",
    )
    ignore_case: bool = Field(default=False, description="Match case-insensitively.")


def _entries(directory: str, prefix: str, budget: list[int]) -> list[tuple[str, str, bool]]:
    """``(absolute, relative, is_dir)`` for one directory, sorted as full paths sort."""
    try:
        with os.scandir(directory) as it:
            entries = list(it)
    except OSError:
        return []
    out: list[tuple[str, str, bool]] = []
    for entry in entries:
        budget[0] -= 1
        if budget[0] < 0:
            break
        if entry.name == PROTECTED_COMPONENT:
            continue
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
        except OSError:
            continue
        if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
            out.append((entry.path, prefix + entry.name, stat.S_ISDIR(mode)))
    # A directory sorts by its name plus "/" so that "a.txt" comes before "a/x".
    out.sort(key=lambda e: e[1] + "/" if e[2] else e[1])
    return out


def _files(root: str, budget: list[int]) -> Iterator[tuple[str, str]]:
    """``(absolute, relative)`` regular files below ``root`` in path order.

    Links are not followed and ``.git`` is skipped; ``budget[0]`` counts down the entries
    that may still be visited.
    """
    stack = [iter(_entries(root, "", budget))]
    while stack:
        item = next(stack[-1], None)
        if item is None:
            stack.pop()
            continue
        path, rel, is_dir = item
        if is_dir:
            if budget[0] >= 0:
                stack.append(iter(_entries(path, rel + "/", budget)))
        else:
            yield path, rel


class GrepTool:
    name: str = "grep"
    description: str = (
        "Search text files for a regular expression. Prints `path:line:text` for each matching "
        "line, in path order. Searches the workspace unless `path` names a file or directory; "
        "`glob` filters file names. Binary files and `.git` are skipped."
    )
    Args: type[ToolArgs] = GrepArgs

    def __init__(
        self, *, max_matches: int = DEFAULT_MAX_MATCHES, max_visited: int = DEFAULT_MAX_VISITED
    ) -> None:
        self.max_matches = max_matches
        self.max_visited = max_visited

    async def run(self, call: ToolCall) -> ToolResult:
        args = args_of(call, GrepArgs)
        policy = call.policy
        return await run_blocking(args.path or ".", lambda: self._grep(policy, args, call.signal))

    def _grep(self, policy: FencePolicy | None, args: GrepArgs, signal: AbortSignal) -> ToolResult:
        try:
            regex = re.compile(args.pattern, re.IGNORECASE if args.ignore_case else 0)
        except re.error as err:
            raise FileToolError(f"invalid regular expression {args.pattern}: {err}") from err
        name_filters: list[re.Pattern[str]] = []
        if args.glob:
            try:
                name_filters = [glob_regex(p) for p in expand_braces(args.glob)]
            except re.error as err:
                raise FileToolError(f"invalid glob pattern {args.glob}: {err}") from err

        root = resolve_path(policy, args.path or ".")
        shown_root = args.path or "."
        try:
            st = os.stat(root)
        except FileNotFoundError as err:
            raise FileToolError(f"path not found: {shown_root}") from err
        budget = [self.max_visited]
        if stat.S_ISDIR(st.st_mode):
            files: Iterator[tuple[str, str]] = _files(root, budget)
        elif stat.S_ISREG(st.st_mode):
            files = iter([(root, os.path.basename(root))])
        else:
            raise FileToolError(f"{shown_root} is not a regular file or directory")

        out: list[str] = []
        binary = large = 0
        full = False
        for path, rel in files:
            if signal.aborted:
                break
            if name_filters:
                subject = rel if "/" in (args.glob or "") else os.path.basename(rel)
                if not any(f.fullmatch(subject) for f in name_filters):
                    continue
            try:
                with open(path, "rb") as f:
                    if os.fstat(f.fileno()).st_size > MAX_FILE_BYTES:
                        large += 1
                        continue
                    if looks_binary(f.read(SNIFF_BYTES)):
                        binary += 1
                        continue
                    f.seek(0)
                    shown = display_path(policy, path)
                    for number, raw in enumerate(f, start=1):
                        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                        if not regex.search(line):
                            continue
                        if len(out) == self.max_matches:
                            full = True
                            break
                        if len(line) > MAX_LINE_CHARS:
                            line = line[:MAX_LINE_CHARS] + "…"
                        out.append(f"{shown}:{number}:{line}")
            except OSError:
                continue
            if full:
                break

        notes: list[str] = []
        if full:
            notes.append(f"[truncated: showing the first {self.max_matches} matches]")
        if budget[0] < 0:
            notes.append(
                f"[search stopped after visiting {self.max_visited} entries; "
                "narrow the path or glob]"
            )
        if signal.aborted:
            notes.append("[search cancelled]")
        if binary:
            notes.append(f"[skipped {plural(binary, 'binary file')}]")
        if large:
            notes.append(f"[skipped {plural(large, 'file')} larger than {MAX_FILE_BYTES} bytes]")
        lines = out or [f"no matches for {args.pattern}"]
        return ToolResult(
            "\n".join(lines + notes), details={"matches": len(out), "truncated": full}
        )


__all__ = ["DEFAULT_MAX_MATCHES", "GrepArgs", "GrepTool"]
