"""A confined command while it runs, and its outcome as a tool result.

Shared by ``bash`` (which starts commands and waits for them) and the background jobs of
:mod:`tether.tools._jobs` (which keep them running): output is bounded (head and tail kept),
stderr is scanned for the backend's denial signatures, and a timeout or a cancellation kills
everything the command started.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal as signals
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from tether._signals import AbortSignal, cancel_and_wait
from tether.sandbox import (
    CommandProcess,
    ConfinedCommand,
    SandboxUnavailableError,
    kill,
    spawn,
    stop,
)
from tether.sandbox._process import kill_group
from tether.session import JsonValue
from tether.tools._base import ToolResult
from tether.tools.fs._fence import denial_marker

MAX_TIMEOUT: Final = 600.0
"""The longest a command may be given, in seconds (and the longest a job may be waited for)."""
OUTPUT_LIMIT: Final = 30_000
"""Bytes of output kept per call (stdout two thirds, stderr one third; head and tail each)."""
EXIT_GRACE: Final = 0.5
"""Seconds to wait for the pipes to close after the command exited; a process that keeps them
open (possible only under ``danger-full-access``) is then killed with the group."""


# -- output capture ---------------------------------------------------------------------------
class HeadTail:
    """Keeps the first ``limit/2`` and the last ``limit/2`` bytes of a stream."""

    def __init__(self, limit: int) -> None:
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            excess = len(self.tail) - self.tail_limit
            if excess > 0:
                del self.tail[:excess]

    @property
    def omitted(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        head = self.head.decode("utf-8", "replace")
        if not self.omitted:
            return head + self.tail.decode("utf-8", "replace")
        tail = self.tail.decode("utf-8", "replace")
        return f"{head}\n[... {self.omitted} bytes omitted ...]\n{tail}"


class SignatureScan:
    """Finds denial signatures anywhere in a stream, including the part not kept."""

    def __init__(self, signatures: tuple[str, ...]) -> None:
        self.signatures = tuple(s.encode() for s in signatures)
        self.keep = max((len(s) for s in self.signatures), default=1) - 1
        self.carry = b""
        self.found = False

    def feed(self, chunk: bytes) -> None:
        if self.found or not self.signatures:
            return
        window = self.carry + chunk
        self.found = any(sig in window for sig in self.signatures)
        self.carry = window[-self.keep :] if self.keep else b""


RunStatus = Literal["running", "exited", "timeout", "cancelled", "killed"]
"""Where a command run stands.

- ``running``: not finished yet (background jobs only).
- ``exited``: it ended by itself (``exit_code`` or ``signal`` says how).
- ``timeout``: it outlived its timeout; everything it started was killed.
- ``cancelled``: the call was cancelled; everything it started was killed.
- ``killed``: ``job_kill`` (or tether shutting down) stopped it.
"""


@dataclass(frozen=True, slots=True)
class Outcome:
    status: RunStatus
    exit_code: int | None
    signal: str | None
    stdout: str
    stderr: str
    stdout_bytes: int
    stderr_bytes: int
    denied: bool
    runner_failure: str | None


class RunningCommand:
    """One spawned :class:`ConfinedCommand`, its output readers and its exit."""

    def __init__(self, command: ConfinedCommand, process: CommandProcess, limit: int) -> None:
        self.command = command
        self.process = process
        self.stdout = HeadTail(limit * 2 // 3)
        self.stderr = HeadTail(limit - limit * 2 // 3)
        self.scan = SignatureScan(command.denial_signatures)
        self.status: RunStatus = "running"
        assert process.stdout is not None and process.stderr is not None
        self._readers = [
            asyncio.ensure_future(_pump(process.stdout, (self.stdout.feed,))),
            asyncio.ensure_future(_pump(process.stderr, (self.stderr.feed, self.scan.feed))),
        ]
        self._exit = asyncio.ensure_future(process.wait())
        self._closed = False

    @classmethod
    async def start(
        cls, command: ConfinedCommand, *, cwd: str, limit: int = OUTPUT_LIMIT
    ) -> RunningCommand:
        """Spawn ``command``; raises ``SandboxUnavailableError`` (nothing ran) or ``OSError``."""
        try:
            process = await spawn(command, cwd=cwd)
        except BaseException:
            command.close()
            raise
        return cls(command, process, limit)

    @property
    def done(self) -> bool:
        return self.status != "running"

    async def wait(self, timeout: float | None, signal: AbortSignal | None = None) -> Outcome:
        """Wait for the exit; a timeout or the signal kills everything the command started."""
        aborted = asyncio.ensure_future(signal.wait()) if signal is not None else None
        try:
            waiting: set[asyncio.Task[object]] = {self._exit}
            if aborted is not None:
                waiting.add(aborted)
            done, _ = await asyncio.wait(
                waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            if self._exit not in done:
                if self.status == "running":
                    cancelled = aborted is not None and aborted in done
                    self.status = "cancelled" if cancelled else "timeout"
                await stop(self.process, self.command)
            elif self.status == "running":
                self.status = "exited"
            await self._drain()
        except BaseException:
            # Our own caller was cancelled: take everything down before propagating.
            self.kill_now("cancelled")
            with contextlib.suppress(BaseException):
                await asyncio.wait([self._exit, *self._readers], timeout=EXIT_GRACE)
            await self._finish()
            raise
        finally:
            if aborted is not None:
                await cancel_and_wait(aborted)
        await self._finish()
        return self.outcome()

    def kill_now(self, status: RunStatus = "killed") -> None:
        """Stop it now, without waiting (``job_kill``, shutdown, a cancelled caller)."""
        if self.status == "running":
            self.status = status
        if self.process.returncode is None:
            kill(self.process, self.command)

    async def _drain(self) -> None:
        _, still_open = await asyncio.wait(self._readers, timeout=EXIT_GRACE)
        if still_open:
            kill_group(self.process)
            await asyncio.wait(still_open, timeout=EXIT_GRACE)

    async def _finish(self) -> None:
        try:
            for reader in self._readers:
                await cancel_and_wait(reader)
        finally:
            if not self._closed:
                self._closed = True
                self.command.close()

    def outcome(self) -> Outcome:
        code = self.process.returncode if self.status == "exited" else None
        sig = None
        if code is not None and code < 0:
            with contextlib.suppress(ValueError):
                sig = signals.Signals(-code).name
            sig = sig or f"signal {-code}"
            code = None
        stderr = self.stderr.text()
        failure = None
        if self.status == "exited":
            failure = self.command.runner_failure(self.process.returncode, stderr)
        return Outcome(
            status=self.status,
            exit_code=code,
            signal=sig,
            stdout=self.stdout.text(),
            stderr=stderr,
            stdout_bytes=self.stdout.total,
            stderr_bytes=self.stderr.total,
            denied=self.scan.found and self.command.confined,
            runner_failure=failure,
        )


async def _pump(stream: asyncio.StreamReader, sinks: tuple[Callable[[bytes], None], ...]) -> None:
    while chunk := await stream.read(65536):
        for sink in sinks:
            sink(chunk)


# -- rendering ----------------------------------------------------------------------------------
def status_line(outcome: Outcome, timeout: float | None) -> str:
    if outcome.status == "timeout":
        return f"timed out after {timeout:g} s: the command and everything it started were killed"
    if outcome.status == "cancelled":
        return "cancelled: the command and everything it started were killed"
    if outcome.status == "killed":
        return "killed: the command and everything it started were stopped"
    if outcome.status == "running":
        return "still running"
    if outcome.signal is not None:
        return f"terminated by {outcome.signal}"
    return f"exit code: {outcome.exit_code}"


def render(
    outcome: Outcome,
    command: ConfinedCommand,
    timeout: float | None,
    *,
    quiet_success: bool = False,
    **extra: JsonValue,
) -> ToolResult:
    """The tool result for one finished (or still running) command.

    ``quiet_success``: a command that exited 0, unblocked and with output, reports just its
    output, as the reference harness's ``bash`` does (``docs/decisions/0046``); a silent one
    still says ``exit code: 0`` so the result is never empty. A job's result keeps the line:
    it is how a poll tells a finished job from a running one."""
    details: dict[str, JsonValue] = {
        "exit_code": outcome.exit_code,
        "status": outcome.status,
        "mode": command.mode.value,
        "backend": command.backend,
        "enforcement": command.enforcement,
        "stdout_bytes": outcome.stdout_bytes,
        "stderr_bytes": outcome.stderr_bytes,
        **extra,
    }
    if outcome.runner_failure is not None:
        return unavailable_result(
            SandboxUnavailableError(
                f"{outcome.runner_failure}; the command did not run",
                mode=command.mode.value,
                reasons={command.backend: outcome.runner_failure},
            ),
            **extra,
        )
    if outcome.signal is not None:
        details["signal"] = outcome.signal
    if outcome.status == "timeout":
        details["timed_out"] = True
    if outcome.status == "cancelled":
        details["cancelled"] = True
    parts = []
    if outcome.stdout:
        parts.append(outcome.stdout.rstrip("\n"))
    if outcome.stderr:
        parts.append("[stderr]\n" + outcome.stderr.rstrip("\n"))
    clean = outcome.status == "exited" and outcome.exit_code == 0 and not outcome.denied
    if not (quiet_success and clean and parts):
        parts.append(status_line(outcome, timeout))
    if outcome.denied:
        details["sandbox_denied"] = True
        parts.append(denial_marker(command.mode.value))
        if command.denial_note is not None:
            parts.append(command.denial_note)
    failed = outcome.status != "running" and (
        outcome.status != "exited" or outcome.exit_code != 0 or outcome.denied
    )
    return ToolResult("\n".join(parts), failed, details)


def unavailable_result(err: SandboxUnavailableError, **extra: JsonValue) -> ToolResult:
    reasons: dict[str, JsonValue] = dict(err.reasons)
    return ToolResult.error(
        f"{err.code}: {err}",
        code=err.code,
        sandbox_unavailable=True,
        mode=err.mode,
        reasons=reasons,
        **extra,
    )


__all__ = [
    "EXIT_GRACE",
    "MAX_TIMEOUT",
    "OUTPUT_LIMIT",
    "HeadTail",
    "Outcome",
    "RunStatus",
    "RunningCommand",
    "SignatureScan",
    "render",
    "status_line",
    "unavailable_result",
]
