"""``read``: a text file's lines, bounded in lines and bytes, never binary garbage."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import BinaryIO, Final

from pydantic import Field

from tether.tools._base import ToolArgs, ToolCall, ToolResult
from tether.tools.fs._common import (
    SNIFF_BYTES,
    args_of,
    call_rules,
    looks_binary,
    mode_of,
    open_regular_for_read,
    plural,
    read_some,
    run_blocking,
)
from tether.tools.fs._fence import FileToolError, resolve_path, shown_name

DEFAULT_MAX_BYTES: Final = 256 * 1024
DEFAULT_LINE_LIMIT: Final = 2000
EMPTY_FILE: Final = "[empty file]"


class ReadArgs(ToolArgs):
    path: str = Field(
        min_length=1, description="File to read; relative paths are under the workspace."
    )
    offset: int = Field(default=1, ge=1, description="First line to return (1-based).")
    limit: int = Field(
        default=DEFAULT_LINE_LIMIT, ge=1, description="Maximum number of lines to return."
    )


def _lines(f: BinaryIO, cap: int) -> Iterator[tuple[bytes, bool]]:
    """Each line with its newline, and whether it was cut.

    A line longer than ``cap`` bytes is cut to ``cap`` and the rest of it skipped in chunks,
    so one enormous line never has to fit in memory.
    """
    while True:
        line = f.readline(cap + 1)
        if not line:
            return
        if len(line) <= cap:
            yield line, False
            continue
        if not line.endswith(b"\n"):
            while True:
                rest = f.readline(64 * 1024)
                if not rest or rest.endswith(b"\n"):
                    break
        yield line[:cap], True


def _decode_cut(data: bytes) -> str:
    """Decode bytes cut at an arbitrary offset without a replacement char for the split char."""
    for back in range(4):
        try:
            return data[: len(data) - back].decode("utf-8")
        except UnicodeDecodeError as err:
            if err.reason != "unexpected end of data":
                break
    return data.decode("utf-8", errors="replace")


class ReadTool:
    name: str = "read"
    description: str = (
        "Read a text file. Returns its lines as they are (up to `limit` lines starting at line "
        "`offset`, and at most about 256 KiB); a note at the end says how to continue when the "
        "output was cut. Binary files are reported, not shown. Relative paths are under the "
        "workspace."
    )
    Args: type[ToolArgs] = ReadArgs

    def __init__(self, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes

    async def run(self, call: ToolCall) -> ToolResult:
        args = args_of(call, ReadArgs)
        target = resolve_path(call.policy, args.path)
        return await run_blocking(
            args.path, lambda: self._read(call, target, args.path, args.offset, args.limit)
        )

    def _read(
        self, call: ToolCall, target: str, display: str, offset: int, limit: int
    ) -> ToolResult:
        fd = open_regular_for_read(target, display, call_rules(call), mode_of(call.policy))
        with os.fdopen(fd, "rb") as f:
            head = read_some(f, SNIFF_BYTES, display)
            if looks_binary(head):
                size = os.fstat(f.fileno()).st_size
                raise FileToolError(
                    f"{display} is a binary file ({plural(size, 'byte')}); "
                    "read shows text files only"
                )
            f.seek(0)
            return self._collect(f, target, display, offset, limit)

    def _collect(
        self, f: BinaryIO, target: str, display: str, offset: int, limit: int
    ) -> ToolResult:
        cap = self.max_bytes
        shown: list[bytes] = []
        used = 0
        seen = 0
        note: str | None = None
        long_line = False
        for number, (line, cut) in enumerate(_lines(f, cap), start=1):
            seen = number
            if number < offset:
                continue
            last = offset + len(shown) - 1
            if len(shown) == limit:
                note = (
                    f"[truncated: showing lines {offset}-{last}; reached the "
                    f"{limit}-line limit; continue with offset={last + 1}]"
                )
                break
            if cut or used + len(line) > cap:
                if shown:
                    note = (
                        f"[truncated: showing lines {offset}-{last}; reached the "
                        f"{cap}-byte limit; continue with offset={last + 1}]"
                    )
                    break
                shown.append(line)
                long_line = True
                note = f"[truncated: line {number} is longer than {cap} bytes; showing its start"
                note += f"; continue with offset={number + 1}]" if f.read(1) else "]"
                break
            shown.append(line)
            used += len(line)

        if seen == 0 and offset == 1:
            return ToolResult(EMPTY_FILE, details={"path": shown_name(target), "lines": 0})
        if not shown:
            raise FileToolError(
                f"offset {offset} is past the end of {display} ({plural(seen, 'line')})"
            )
        data = b"".join(shown)
        text = _decode_cut(data) if long_line else data.decode("utf-8", errors="replace")
        last_line = offset + len(shown) - 1
        if note is not None:
            text = text + ("" if text.endswith("\n") else "\n") + note
        return ToolResult(
            text,
            details={
                "path": shown_name(target),
                "first_line": offset,
                "last_line": last_line,
                "truncated": note is not None,
            },
        )


__all__ = ["DEFAULT_LINE_LIMIT", "DEFAULT_MAX_BYTES", "EMPTY_FILE", "ReadArgs", "ReadTool"]
