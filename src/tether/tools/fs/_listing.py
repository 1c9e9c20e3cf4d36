"""``ls`` (one directory) and ``glob`` (paths matching a pattern), never into hidden paths."""

from __future__ import annotations

import os
import stat
from typing import Final

from pydantic import Field

from tether.sandbox import PathRules
from tether.session import JsonValue
from tether.tools._base import ToolArgs, ToolCall, ToolResult
from tether.tools.fs._common import (
    Interrupt,
    args_of,
    call_rules,
    mode_of,
    run_blocking,
    run_interruptible,
)
from tether.tools.fs._fence import (
    FencePolicy,
    FileToolError,
    display_path,
    os_reason,
    resolve_path,
    shown_name,
)
from tether.tools.fs._glob_pattern import MAX_GLOB_CHARS, compile_glob, expand_braces, split_pattern
from tether.tools.fs._walk import open_root, tree

DEFAULT_MAX_ENTRIES: Final = 1000
DEFAULT_MAX_VISITED: Final = 200_000
"""``glob`` stops walking after this many directory entries, so a huge tree cannot stall it."""
EMPTY_DIRECTORY: Final = "[empty directory]"


class LsArgs(ToolArgs):
    path: str = Field(
        default=".", min_length=1, description="Directory to list; default the workspace."
    )


def _ls_name(entry: os.DirEntry[str], st: os.stat_result, directory: int) -> str:
    name = shown_name(entry.name)
    if stat.S_ISLNK(st.st_mode):
        try:
            return f"{name} -> {shown_name(os.readlink(entry.name, dir_fd=directory))}"
        except OSError:
            return f"{name} -> ?"
    if stat.S_ISDIR(st.st_mode):
        return name + "/"
    return name


class LsTool:
    name: str = "ls"
    description: str = (
        "List one directory: entries sorted by name, directories end with `/`, symbolic links "
        "show their target; hidden paths (credentials, tether's own state) are left out. "
        "Relative paths are under the workspace."
    )
    Args: type[ToolArgs] = LsArgs

    def __init__(self, *, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        self.max_entries = max_entries

    async def run(self, call: ToolCall) -> ToolResult:
        args = args_of(call, LsArgs)
        target = resolve_path(call.policy, args.path)
        mode = mode_of(call.policy)
        return await run_blocking(
            args.path, lambda: self._ls(target, args.path, call_rules(call), mode)
        )

    def _ls(self, target: str, display: str, rules: PathRules, mode: str | None) -> ToolResult:
        try:
            root = open_root(target, rules, display, mode, "list")
        except FileNotFoundError as err:
            raise FileToolError(f"directory not found: {display}") from err
        except NotADirectoryError as err:
            raise FileToolError(f"{display} is not a directory") from err
        except OSError as err:
            raise FileToolError(os_reason(err, display)) from err
        names: list[str] = []
        try:
            with os.scandir(root.fd) as it:
                for entry in it:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if not rules.hides_entry(os.path.join(root.real, entry.name), st):
                        names.append(_ls_name(entry, st, root.fd))
        except OSError as err:
            raise FileToolError(os_reason(err, display)) from err
        finally:
            os.close(root.fd)
        names.sort()
        details: dict[str, JsonValue] = {
            "path": shown_name(os.path.normpath(target)),
            "entries": len(names),
        }
        if not names:
            return ToolResult(EMPTY_DIRECTORY, details=details)
        text = "\n".join(names[: self.max_entries])
        if len(names) > self.max_entries:
            text += f"\n[truncated: showing {self.max_entries} of {len(names)} entries]"
        return ToolResult(text, details=details)


# -- glob ------------------------------------------------------------------------------------


class GlobArgs(ToolArgs):
    pattern: str = Field(
        min_length=1,
        max_length=MAX_GLOB_CHARS,
        description="Glob pattern, e.g. `**/*.py` or `src/*.{ts,tsx}`; `**` spans directories.",
    )
    path: str | None = Field(
        default=None, description="Directory the pattern is relative to; default the workspace."
    )


class GlobTool:
    name: str = "glob"
    description: str = (
        "Find files and directories whose path matches a glob pattern (relative to the "
        "workspace or to `path`). `*` and `?` match within one path component, `**` across "
        "components, `{a,b}` alternatives. Results are sorted; directories end with `/`; "
        "`.git` directories and hidden paths (credentials, tether's own state) are skipped."
    )
    Args: type[ToolArgs] = GlobArgs

    def __init__(
        self, *, max_results: int = DEFAULT_MAX_ENTRIES, max_visited: int = DEFAULT_MAX_VISITED
    ) -> None:
        self.max_results = max_results
        self.max_visited = max_visited

    async def run(self, call: ToolCall) -> ToolResult:
        args = args_of(call, GlobArgs)
        policy = call.policy
        return await run_interruptible(
            args.path or args.pattern,
            call.signal,
            lambda interrupt: self._glob(policy, args, interrupt, call_rules(call)),
        )

    def _glob(
        self, policy: FencePolicy | None, args: GlobArgs, interrupt: Interrupt, rules: PathRules
    ) -> ToolResult:
        start = resolve_path(policy, args.path or ".")
        mode = mode_of(policy)
        if args.path is not None and not os.path.isdir(start):
            if os.path.lexists(start):
                raise FileToolError(f"{args.path} is not a directory")
            raise FileToolError(f"directory not found: {args.path}")
        matches: set[str] = set()
        dirs: set[str] = set()
        visited = 0
        stopped = False
        for pattern in expand_braces(args.pattern):
            literal, rest = split_pattern(pattern)
            base = os.path.join(start, literal) if literal else start
            if not rest:
                continue
            matcher = compile_glob(rest, args.pattern)
            depth = None if "**" in rest.split("/") else rest.count("/") + 1
            try:
                root = open_root(base, rules, args.path or literal or ".", mode, "list")
            except OSError:
                continue  # no such directory: nothing matches
            try:
                for entry, _ in tree(root, rules, depth=depth, every_kind=True):
                    interrupt.check()
                    visited += 1
                    if visited > self.max_visited:
                        stopped = True
                        break
                    if matcher.fullmatch(entry.rel):
                        full = os.path.join(base, entry.rel)
                        matches.add(full)
                        if entry.is_dir:
                            dirs.add(full)
            finally:
                os.close(root.fd)
            if stopped:
                break
        shown = sorted(display_path(policy, m) + ("/" if m in dirs else "") for m in matches)
        details: dict[str, JsonValue] = {"pattern": args.pattern, "matches": len(shown)}
        if not shown:
            text = f"no paths match {args.pattern}"
        else:
            text = "\n".join(shown[: self.max_results])
            if len(shown) > self.max_results:
                text += f"\n[truncated: showing {self.max_results} of {len(shown)} matches]"
        if stopped:
            text += (
                f"\n[search stopped after visiting {self.max_visited} entries; "
                "narrow the pattern or path]"
            )
        return ToolResult(text, details=details)


__all__ = [
    "EMPTY_DIRECTORY",
    "GlobArgs",
    "GlobTool",
    "LsArgs",
    "LsTool",
]
