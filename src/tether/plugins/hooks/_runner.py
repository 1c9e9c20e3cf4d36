"""Run one hook command: payload on stdin, scrubbed environment, timeout, own process group.

The command line goes to ``/bin/sh -c`` as in Claude Code, so settings written for it (pipes,
``$CLAUDE_PROJECT_DIR``, ``jq``) work unchanged. :func:`run_command` never raises for anything
the command does: a command that cannot start, crashes, hangs past its timeout or floods its
output comes back as a :class:`CommandRun` whose ``status`` says what happened. Only the
caller's own cancellation propagates (``CancelledError``), after the process group is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal as signals
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from tether._signals import AbortSignal, cancel_and_wait

MAX_OUTPUT: Final = 1024 * 1024
"""Bytes kept of each of stdout and stderr; the rest is read and dropped so the hook never
blocks on a full pipe."""

EXIT_GRACE: Final = 1.0
"""Seconds to wait for the pipes to close after the command exited. A backgrounded child that
keeps them open is killed with the group after this, instead of stalling the agent."""

DEFAULT_ENV: Final = ("PATH", "HOME", "LANG", "TERM")
"""Variables passed from tether's environment; everything else (API keys) is scrubbed."""

FALLBACK_PATH: Final = "/usr/local/bin:/usr/bin:/bin"
SHELL: Final = "/bin/sh"

RunStatus = Literal["exited", "timeout", "cancelled", "spawn-failed"]
"""How a command run ended.

- ``exited``: the command exited on its own; ``exit_code`` is set.
- ``timeout``: it ran past its timeout and its process group was killed.
- ``cancelled``: the caller's abort signal fired and the group was killed.
- ``spawn-failed``: the shell could not be started at all (``error`` says why).
"""


@dataclass(frozen=True, slots=True)
class CommandRun:
    status: RunStatus
    exit_code: int | None
    stdout: str
    stderr: str
    duration_ms: int
    error: str | None = None


def hook_env(
    project_dir: str,
    pass_env: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The scrubbed environment: the allowlist plus ``CLAUDE_PROJECT_DIR``."""
    source = os.environ if environ is None else environ
    env = {name: source[name] for name in (*DEFAULT_ENV, *pass_env) if name in source}
    env.setdefault("PATH", FALLBACK_PATH)
    env["CLAUDE_PROJECT_DIR"] = project_dir
    return env


async def run_command(
    command: str,
    stdin: bytes,
    *,
    cwd: str | None,
    env: Mapping[str, str],
    timeout: float,
    signal: AbortSignal | None = None,
    max_output: int = MAX_OUTPUT,
    argv: Sequence[str] | None = None,
) -> CommandRun:
    """Run one hook command. ``argv`` (with ``env``) replaces ``[SHELL, "-c", command]`` when
    the caller confined the command (a sandbox runner's wrapped argv)."""
    started = time.monotonic()

    def elapsed() -> int:
        return int((time.monotonic() - started) * 1000)

    if signal is not None and signal.aborted:
        return CommandRun("cancelled", None, "", "", 0)
    if cwd is not None and not os.path.isdir(cwd):
        cwd = None  # a vanished workspace must not turn every hook into a spawn failure
    spawn = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *(argv if argv is not None else (SHELL, "-c", command)),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
        )
    )
    try:
        proc = await asyncio.shield(spawn)
    except OSError as err:
        return CommandRun("spawn-failed", None, "", "", elapsed(), f"cannot start {SHELL}: {err}")
    except asyncio.CancelledError:
        # The shell is already running once the fork happened: cancelling the spawn would kill
        # only the shell and then wait for pipes its children still hold. Let it finish, then
        # take the whole group down.
        await asyncio.wait({spawn})
        if not spawn.cancelled() and spawn.exception() is None:
            orphan = spawn.result()
            _kill_group(orphan)
            reap = asyncio.ensure_future(orphan.communicate())
            await asyncio.wait({reap}, timeout=EXIT_GRACE)
            await cancel_and_wait(reap)
        raise

    out, err_buf = bytearray(), bytearray()
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    tasks = [
        asyncio.ensure_future(_feed(proc.stdin, stdin)),
        asyncio.ensure_future(_drain(proc.stdout, out, max_output)),
        asyncio.ensure_future(_drain(proc.stderr, err_buf, max_output)),
    ]
    readers = tasks[1:]
    waiter = asyncio.ensure_future(proc.wait())
    aborted: asyncio.Task[None] | None = (
        asyncio.ensure_future(signal.wait()) if signal is not None else None
    )
    status: RunStatus = "exited"
    try:
        pending: set[asyncio.Task[object]] = {waiter} if aborted is None else {waiter, aborted}
        done, _ = await asyncio.wait(pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if waiter not in done:
            status = "cancelled" if aborted is not None and aborted in done else "timeout"
            _kill_group(proc)
            await waiter
        _, still_open = await asyncio.wait(readers, timeout=EXIT_GRACE)
        if still_open:
            # Something the hook started still holds the pipes: take the group down so they
            # close, rather than leave the readers (and the transport) dangling.
            _kill_group(proc)
            await asyncio.wait(still_open, timeout=EXIT_GRACE)
    except BaseException:
        _kill_group(proc)
        # Reap it and let the pipes close before propagating, so nothing outlives the loop.
        await asyncio.wait([waiter, *readers], timeout=EXIT_GRACE)
        raise
    finally:
        # Stopped and awaited: nothing this run started outlives it.
        for task in (*tasks, waiter, *([aborted] if aborted is not None else [])):
            await cancel_and_wait(task)
    return CommandRun(
        status,
        proc.returncode if status == "exited" else None,
        out.decode("utf-8", "replace"),
        err_buf.decode("utf-8", "replace"),
        elapsed(),
    )


async def _feed(pipe: asyncio.StreamWriter, data: bytes) -> None:
    # A hook that never reads stdin (or exits first) is normal: a broken pipe is not an error.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        pipe.write(data)
        await pipe.drain()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError, OSError):
        pipe.close()
        await pipe.wait_closed()


async def _drain(stream: asyncio.StreamReader, buffer: bytearray, limit: int) -> None:
    while chunk := await stream.read(65536):
        room = limit - len(buffer)
        if room > 0:
            buffer.extend(chunk[:room])


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signals.SIGKILL)


__all__ = [
    "DEFAULT_ENV",
    "MAX_OUTPUT",
    "CommandRun",
    "RunStatus",
    "hook_env",
    "run_command",
]
