"""Shared pieces of the file tools: running blocking work off the loop, sniffing content, and
keeping hidden paths (:mod:`tether.sandbox._paths`) out of every read."""

from __future__ import annotations

import asyncio
import os
import stat
import threading
from collections.abc import Callable
from typing import BinaryIO, Final, TypeVar

from tether._signals import AbortedError, AbortSignal
from tether.sandbox import SANDBOX_SERVICE, PathRules, rules_for
from tether.tools._base import ToolArgs, ToolCall, ToolResult
from tether.tools.fs._fence import (
    FencePolicy,
    FileToolError,
    error_result,
    hidden_error,
    os_reason,
    refuse_hidden,
)

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


def read_some(f: BinaryIO, size: int, display: str) -> bytes:
    """``f.read(size)``, for a file the tools opened: they open with ``O_NONBLOCK`` (a FIFO
    must not block the open), so a "regular" file that waits for data (``/proc/kmsg``, some
    files of ``/proc`` and ``/sys``) reads as nothing available (``None``, ``EAGAIN``)
    rather than blocking: refused with a clear error instead of read as empty."""
    try:
        data = f.read(size)
    except BlockingIOError:
        data = None
    if data is None:
        raise FileToolError(
            f"cannot read {display}: it has no data to give now (it waits for data, like a "
            "device or a kernel interface); the file tools read ordinary files only"
        )
    return data


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


class Interrupt:
    """Whether work running in a worker thread must stop: its call's signal fired, or the
    task awaiting it was cancelled. The work calls :meth:`check` between files and lines."""

    def __init__(self, signal: AbortSignal) -> None:
        self._signal = signal
        self._cancelled = threading.Event()

    def check(self) -> None:
        """Raise :class:`~tether._signals.AbortedError` once the work must stop."""
        if self._signal.aborted or self._cancelled.is_set():
            raise AbortedError(self._signal.reason)

    def cancel(self) -> None:
        self._cancelled.set()


async def run_interruptible(
    display: str, signal: AbortSignal, fn: Callable[[Interrupt], ToolResult]
) -> ToolResult:
    """:func:`run_blocking` for work that may run long (a search): ``fn`` checks its
    :class:`Interrupt`, and a cancelled caller waits for the thread to see it and stop, so
    no search goes on unowned after its call has ended."""
    interrupt = Interrupt(signal)
    work = asyncio.ensure_future(run_blocking(display, lambda: fn(interrupt)))
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        interrupt.cancel()
        await asyncio.wait({work})
        if not work.cancelled():
            work.exception()  # moot now: the caller is cancelled
        raise


def call_rules(call: ToolCall) -> PathRules:
    """The hidden and control paths for ``call`` (the ``sandbox`` service's, else the
    defaults); a failure to work them out refuses the call rather than hiding less."""
    try:
        return rules_for(call.ctx.get(SANDBOX_SERVICE))
    except Exception as err:
        raise FileToolError(
            f"cannot tell which paths are hidden ({err}); the file tools refuse to run"
        ) from err


def mode_of(policy: FencePolicy | None) -> str | None:
    return None if policy is None else str(policy.mode)


def open_checked(
    path: str, flags: int, rules: PathRules, display: str, mode: str | None, verb: str
) -> tuple[int, os.stat_result]:
    """Open ``path`` (its name checked first, so a hidden one is never even opened), then
    check what was opened (:func:`refuse_hidden`); the descriptor and its ``stat``."""
    if rules.hides(os.path.realpath(path)):
        raise hidden_error(display, mode, verb)
    fd = os.open(path, flags | os.O_CLOEXEC)
    try:
        return fd, refuse_hidden(fd, rules, display, mode, verb)
    except BaseException:
        os.close(fd)
        raise


def open_regular_for_read(path: str, display: str, rules: PathRules, mode: str | None) -> int:
    """Open ``path`` (links followed) for reading, refusing hidden paths, directories and
    special files.

    ``O_NONBLOCK`` keeps a FIFO from blocking the open; anything that is not a regular file
    (FIFO, device, socket) is refused because reading it may never end.
    """
    try:
        fd, st = open_checked(path, os.O_RDONLY | os.O_NONBLOCK, rules, display, mode, "read")
    except IsADirectoryError as err:
        raise FileToolError(f"{display} is a directory; use ls to list it") from err
    except OSError as err:
        raise FileToolError(os_reason(err, display)) from err
    if stat.S_ISDIR(st.st_mode):
        os.close(fd)
        raise FileToolError(f"{display} is a directory; use ls to list it")
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise FileToolError(f"{display} is not a regular file")
    return fd
