"""``grep``: a regular expression over the text files under a path, never a hidden one."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import Final

import regex
from pydantic import Field

from tether.sandbox import PathRules
from tether.tools._base import ToolArgs, ToolCall, ToolResult
from tether.tools.fs._common import (
    SNIFF_BYTES,
    Interrupt,
    args_of,
    call_rules,
    looks_binary,
    mode_of,
    open_checked,
    plural,
    run_interruptible,
)
from tether.tools.fs._fence import (
    FencePolicy,
    FileToolError,
    display_path,
    hidden_error,
    resolve_path,
)
from tether.tools.fs._glob_pattern import MAX_GLOB_CHARS, GlobMatcher, compile_glob, expand_braces
from tether.tools.fs._listing import DEFAULT_MAX_VISITED
from tether.tools.fs._regex_budget import MATCH_TIMEOUT, SEARCH_BUDGET, MatchBudget, compile_regex
from tether.tools.fs._walk import open_entry, open_root, tree

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
        max_length=MAX_GLOB_CHARS,
        description="Only files matching this glob, e.g. `*.py` (a pattern with `/` matches "
        "the path relative to `path`).",
    )
    ignore_case: bool = Field(default=False, description="Match case-insensitively.")
    literal: bool = Field(
        default=False, description="Search for `pattern` as plain text, not a regular expression."
    )


class GrepTool:
    name: str = "grep"
    description: str = (
        "Search text files for a regular expression. Prints `path:line:text` for each matching "
        "line, in path order. Searches the workspace unless `path` names a file or directory; "
        "`glob` filters file names. Binary files, `.git` and hidden paths (credentials, "
        "tether's own state) are skipped. A pattern too expensive to match (nested "
        "repetition) is refused; `literal` searches for plain text."
    )
    Args: type[ToolArgs] = GrepArgs

    def __init__(
        self,
        *,
        max_matches: int = DEFAULT_MAX_MATCHES,
        max_visited: int = DEFAULT_MAX_VISITED,
        match_timeout: float = MATCH_TIMEOUT,
        search_budget: float = SEARCH_BUDGET,
    ) -> None:
        self.max_matches = max_matches
        self.max_visited = max_visited
        self.match_timeout = match_timeout
        self.search_budget = search_budget

    async def run(self, call: ToolCall) -> ToolResult:
        args = args_of(call, GrepArgs)
        policy = call.policy
        return await run_interruptible(
            args.path or ".",
            call.signal,
            lambda interrupt: self._grep(policy, args, interrupt, call_rules(call)),
        )

    def _grep(
        self, policy: FencePolicy | None, args: GrepArgs, interrupt: Interrupt, rules: PathRules
    ) -> ToolResult:
        source = regex.escape(args.pattern) if args.literal else args.pattern
        compiled = compile_regex(source, ignore_case=args.ignore_case)
        search = _Search(
            compiled, MatchBudget(args.pattern, self.match_timeout, self.search_budget)
        )
        names = _NameFilter(args.glob)

        root = resolve_path(policy, args.path or ".")
        shown_root = args.path or "."
        mode = mode_of(policy)
        if rules.hides(os.path.realpath(root)):
            raise hidden_error(shown_root, mode, "search")
        try:
            st = os.stat(root)
        except FileNotFoundError as err:
            raise FileToolError(f"path not found: {shown_root}") from err
        budget = [self.max_visited]
        out: list[str] = []
        counts = [0, 0]  # binary, large
        if stat.S_ISDIR(st.st_mode):
            walk = open_root(root, rules, shown_root, mode, "search")
            try:
                for entry, parent in tree(walk, rules, budget):
                    interrupt.check()
                    if len(out) > self.max_matches:
                        break
                    if entry.is_dir:
                        continue
                    if not names.wanted(entry.rel):
                        continue
                    fd = open_entry(entry, parent, rules)
                    if fd is not None:
                        shown = display_path(policy, os.path.join(root, entry.rel))
                        self._search(fd, shown, search, interrupt, out, counts)
            finally:
                os.close(walk.fd)
        elif stat.S_ISREG(st.st_mode):
            if names.wanted(os.path.basename(root)):
                fd, _ = open_checked(
                    root, os.O_RDONLY | os.O_NONBLOCK, rules, shown_root, mode, "search"
                )
                self._search(fd, display_path(policy, root), search, interrupt, out, counts)
        else:
            raise FileToolError(f"{shown_root} is not a regular file or directory")
        full = len(out) > self.max_matches
        del out[self.max_matches :]
        binary, large = counts

        notes: list[str] = []
        if full:
            notes.append(f"[truncated: showing the first {self.max_matches} matches]")
        if budget[0] < 0:
            notes.append(
                f"[search stopped after visiting {self.max_visited} entries; "
                "narrow the path or glob]"
            )
        if binary:
            notes.append(f"[skipped {plural(binary, 'binary file')}]")
        if large:
            notes.append(f"[skipped {plural(large, 'file')} larger than {MAX_FILE_BYTES} bytes]")
        lines = out or [f"no matches for {args.pattern}"]
        return ToolResult(
            "\n".join(lines + notes), details={"matches": len(out), "truncated": full}
        )

    def _search(
        self,
        fd: int,
        shown: str,
        search: _Search,
        interrupt: Interrupt,
        out: list[str],
        counts: list[int],
    ) -> None:
        """Append ``shown:N:line`` for each matching line of the open file ``fd`` (closed
        here), at most one past ``max_matches`` (which says the output was cut)."""
        with os.fdopen(fd, "rb") as f:
            if os.fstat(f.fileno()).st_size > MAX_FILE_BYTES:
                counts[1] += 1
                return
            try:
                head = f.read(SNIFF_BYTES)
                if head is None:
                    return  # nothing to read now (a file that waits for data): skipped
                if looks_binary(head):
                    counts[0] += 1
                    return
                f.seek(0)
                for number, raw in enumerate(f, start=1):
                    interrupt.check()
                    line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                    if not search.budget.search(search.compiled, line, f"line {number} of {shown}"):
                        continue
                    if len(out) == self.max_matches:
                        out.append("")  # the sentinel: one more match than is shown
                        return
                    if len(line) > MAX_LINE_CHARS:
                        line = line[:MAX_LINE_CHARS] + "…"
                    out.append(f"{shown}:{number}:{line}")
            except OSError:
                return


@dataclass(frozen=True, slots=True)
class _Search:
    compiled: regex.Pattern[str]
    budget: MatchBudget


class _NameFilter:
    """Which files ``glob`` lets through (all when there is none)."""

    def __init__(self, glob: str | None) -> None:
        self.by_path = "/" in (glob or "")
        self.matchers: list[GlobMatcher] = (
            [compile_glob(p, glob) for p in expand_braces(glob)] if glob else []
        )

    def wanted(self, rel: str) -> bool:
        if not self.matchers:
            return True
        subject = rel if self.by_path else os.path.basename(rel)
        return any(m.fullmatch(subject) for m in self.matchers)


__all__ = ["DEFAULT_MAX_MATCHES", "GrepArgs", "GrepTool"]
