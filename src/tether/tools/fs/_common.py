"""Shared pieces of the file tools: running blocking work off the loop, and sniffing content."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Callable
from typing import Final, TypeVar

from tether.tools.base import ToolArgs, ToolCall, ToolResult
from tether.tools.fs.fence import FileToolError, error_result, os_reason

A = TypeVar("A", bound=ToolArgs)

SNIFF_BYTES: Final = 8192
"""How much of a file is inspected for NUL bytes to call it binary (git uses the same size)."""


def args_of(call: ToolCall, cls: type[A]) -> A:
    """The call's arguments as the tool's own model (the pipeline validated them with it)."""
    if not isinstance(call.args, cls):
        raise TypeError(f"{call.name}: expected {cls.__name__}, got {type(call.args).__name__}")
    return call.args


def looks_binary(head: bytes) -> bool:
    return b"\0" in head


def encode_text(text: str, what: str) -> bytes:
    """UTF-8 bytes of ``text``; a lone surrogate (possible in JSON) is a readable error."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise FileToolError(
            f"{what} cannot be written as UTF-8 (invalid character at position {err.start})"
        ) from err


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


async def run_blocking(display: str, fn: Callable[[], ToolResult]) -> ToolResult:
    """Run ``fn`` in a worker thread so filesystem latency never stalls other agents.

    Expected failures become ``Error:`` results; an unexpected ``OSError`` is reported with
    its ``strerror`` rather than crashing the call.
    """
    try:
        return await asyncio.to_thread(fn)
    except FileToolError as err:
        return error_result(err)
    except OSError as err:
        return ToolResult.error(os_reason(err, display))


def open_regular_for_read(path: str, display: str) -> int:
    """Open ``path`` (links followed) for reading, refusing directories and special files.

    ``O_NONBLOCK`` keeps a FIFO from blocking the open; anything that is not a regular file
    (FIFO, device, socket) is refused because reading it may never end.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except IsADirectoryError as err:
        raise FileToolError(f"{display} is a directory; use ls to list it") from err
    except OSError as err:
        raise FileToolError(os_reason(err, display)) from err
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode):
        os.close(fd)
        raise FileToolError(f"{display} is a directory; use ls to list it")
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise FileToolError(f"{display} is not a regular file")
    return fd
