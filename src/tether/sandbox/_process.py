"""Spawning and stopping a confined command.

:func:`spawn` starts a :class:`ConfinedCommand` in its own session (so its process group can
be killed as one), with ``close_fds`` (no descriptor of the harness leaks into it) and stdin
from ``/dev/null`` by default. Spawn failures of the runner itself become
:class:`SandboxUnavailableError`: a broken sandbox is an infrastructure failure, never a
reason to run the command some other way.

Supervised commands (Landlock, and bubblewrap without network) come from the fork server
(:mod:`._landlock_client`) as a :class:`ForkedProcess`; everything else is an
``asyncio.subprocess.Process``. Both are
:data:`CommandProcess`, and :func:`kill`, :func:`kill_group` and :func:`stop` take either.

Spawn from the event loop's thread (as ``asyncio.create_subprocess_exec`` does): bubblewrap's
``--die-with-parent`` and the Landlock launcher's death signal follow the thread that forked
them, so a short-lived worker thread would take the command down with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import subprocess
from typing import Final

from tether.sandbox._command import ConfinedCommand
from tether.sandbox._landlock_client import ForkedProcess, Stream, fork_server

STOP_GRACE: Final = 2.0
"""Seconds a supervisor gets to sweep its processes after SIGTERM before the whole
process group is killed outright."""

CommandProcess = asyncio.subprocess.Process | ForkedProcess
"""A spawned command: ``pid`` (its process group), ``stdout``/``stderr`` readers,
``returncode``, ``wait()``, ``send_signal()``."""


async def spawn(
    command: ConfinedCommand,
    *,
    cwd: str | None = None,
    stdin: Stream = subprocess.DEVNULL,
    stdout: Stream = subprocess.PIPE,
    stderr: Stream = subprocess.PIPE,
) -> CommandProcess:
    """Start ``command``. Raises :class:`SandboxUnavailableError` when the sandbox could not
    start it (the command did not run), ``OSError`` when the command itself cannot be
    executed under ``danger-full-access``."""
    if command.fast_path:
        return await fork_server().spawn(
            command, cwd=cwd, stdin=stdin, stdout=stdout, stderr=stderr
        )
    try:
        return await asyncio.create_subprocess_exec(
            *command.argv,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            cwd=cwd,
            env=dict(command.env),
            start_new_session=True,
            close_fds=True,
        )
    except OSError as err:
        if (
            command.runner is not None
            and err.errno in (errno.ENOENT, errno.EACCES, errno.ENOEXEC)
            and err.filename == command.runner
        ):
            raise command.unavailable(
                f"cannot execute the sandbox runner {command.runner}: {err.strerror}"
            ) from err
        raise


def kill(process: CommandProcess, command: ConfinedCommand) -> None:
    """Stop the command and everything it started, now, without waiting.

    A supervisor gets SIGTERM (it kills every process below it, including ones that left the
    process group, then exits); anything else gets SIGKILL on its process group (under
    bubblewrap that kills the PID namespace with it).
    """
    if command.supervised:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        return
    kill_group(process)


def kill_group(process: CommandProcess) -> None:
    """SIGKILL to the command's process group (its session leader's pid)."""
    if isinstance(process, ForkedProcess):
        process.kill_group()
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


async def stop(
    process: CommandProcess, command: ConfinedCommand, grace: float = STOP_GRACE
) -> None:
    """:func:`kill`, then wait for the exit; a supervisor that does not finish its sweep in
    ``grace`` seconds is killed with its group."""
    kill(process, command)
    try:
        await asyncio.wait_for(asyncio.shield(process.wait()), grace)
    except TimeoutError:
        kill_group(process)
        await process.wait()


__all__ = ["STOP_GRACE", "CommandProcess", "kill", "kill_group", "spawn", "stop"]
