"""Background jobs: ``bash`` with ``run_in_background``, read with ``job_output``, stopped with
``job_kill``.

A job is confined exactly like a foreground command (it is the same :class:`RunningCommand`),
belongs to the agent that started it (another agent asking for it gets "unknown job"), keeps
bounded output (head and tail), and dies with tether: the ``jobs`` service kills every job
still running when its plugin is disposed, and the sandbox kills them if the harness process
dies (bubblewrap ``--die-with-parent``; the Landlock supervisor's death signal).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from dataclasses import dataclass, field
from typing import Final, TypeVar

from pydantic import Field

from tether.kernel import ServiceKey
from tether.tools._base import AgentLike, ToolArgs, ToolCall, ToolResult
from tether.tools._command_run import MAX_TIMEOUT, Outcome, RunningCommand, render

T = TypeVar("T")

MAX_JOBS: Final = 32
"""Jobs one manager keeps (running or finished); the oldest finished ones are forgotten."""
JOBS_SERVICE: Final[ServiceKey[JobManager]] = ServiceKey("jobs")
"""The background jobs of ``bash`` (provided by the bash plugin)."""
DEFAULT_WAIT: Final = 30.0


def owner_of(agent: AgentLike | None) -> str | None:
    """Jobs are scoped to the session of the agent that started them."""
    if agent is None:
        return None
    session = agent.session
    return str(getattr(session, "id", id(session)))


@dataclass(eq=False)
class CommandJob:
    """One background command."""

    id: str
    owner: str | None
    command: str
    description: str | None
    running: RunningCommand
    timeout: float | None
    task: asyncio.Future[Outcome] = field(init=False)

    @property
    def done(self) -> bool:
        return self.task.done()

    def result(self) -> ToolResult:
        outcome = self.task.result() if self.task.done() and not self.task.cancelled() else None
        if outcome is None:
            outcome = self.running.outcome()
        rendered = render(outcome, self.running.command, self.timeout, job_id=self.id)
        headline = f"job {self.id} ({self.description or self.command})"
        return ToolResult(f"{headline}\n{rendered.content}", rendered.is_error, rendered.details)


class JobManager:
    """Service ``jobs``: the background jobs of one composition."""

    def __init__(self, *, max_jobs: int = MAX_JOBS) -> None:
        self.max_jobs = max_jobs
        self._jobs: dict[str, CommandJob] = {}
        self._ids = itertools.count(1)
        self._closed = False

    def add_command(
        self,
        call: ToolCall,
        running: RunningCommand,
        command: str,
        description: str | None,
        timeout: float | None,
    ) -> CommandJob:
        if self._closed:
            running.kill_now()
            raise RuntimeError("the jobs service is closed")
        self._forget_finished()
        job = CommandJob(
            f"job-{next(self._ids)}", owner_of(call.agent), command, description, running, timeout
        )
        try:
            # A task of the runtime: closing the kernel stops and awaits a job still running.
            job.task = call.ctx.spawn(running.wait(timeout), name=f"bash {job.id}", report=False)
        except BaseException:
            running.kill_now()
            raise
        job.task.add_done_callback(_retrieve)
        self._jobs[job.id] = job
        return job

    def get(self, job_id: str, owner: str | None) -> CommandJob | None:
        job = self._jobs.get(job_id)
        return job if job is not None and job.owner == owner else None

    def jobs(self, owner: str | None) -> list[CommandJob]:
        return [job for job in self._jobs.values() if job.owner == owner]

    def _forget_finished(self) -> None:
        while len(self._jobs) >= self.max_jobs:
            finished = next((j for j in self._jobs.values() if j.done), None)
            if finished is None:
                break
            del self._jobs[finished.id]

    def close(self) -> None:
        """Kill every running job now (plugin disposal; synchronous on purpose)."""
        self._closed = True
        for job in self._jobs.values():
            if not job.done:
                job.running.kill_now()
                # The loop may stop before the job's task finishes: do not leave its private
                # temp directory behind.
                job.running.command.close()

    async def aclose(self) -> None:
        """:meth:`close`, then wait for the jobs to be reaped (for an orderly shutdown)."""
        self.close()
        pending = [job.task for job in self._jobs.values() if not job.done]
        if pending:
            await asyncio.wait(pending, timeout=5.0)


def _retrieve(task: asyncio.Future[T]) -> None:
    if not task.cancelled():
        task.exception()


class JobOutputArgs(ToolArgs):
    job_id: str = Field(min_length=1, description="The id bash returned for the job.")
    wait: bool = Field(default=False, description="Wait for the job to finish first.")
    timeout: float = Field(
        default=DEFAULT_WAIT,
        gt=0,
        le=MAX_TIMEOUT,
        description=f"With wait: seconds to wait at most (default {DEFAULT_WAIT:g}).",
    )


class JobKillArgs(ToolArgs):
    job_id: str = Field(min_length=1, description="The id bash returned for the job.")


def _manager(call: ToolCall) -> JobManager | None:
    manager = call.ctx.get(JOBS_SERVICE)
    return manager if isinstance(manager, JobManager) else None


def _unknown(job_id: str) -> ToolResult:
    return ToolResult.error(f'unknown job "{job_id}"')


class JobOutputTool:
    name: str = "job_output"
    description: str = (
        "Show a background job's status, exit code when finished, and output so far "
        "(truncated in the middle when long). With wait, wait for it to finish first."
    )
    Args: type[ToolArgs] = JobOutputArgs

    async def run(self, call: ToolCall) -> ToolResult:
        args = call.args
        assert isinstance(args, JobOutputArgs)
        manager = _manager(call)
        job = manager.get(args.job_id, owner_of(call.agent)) if manager else None
        if job is None:
            return _unknown(args.job_id)
        if args.wait and not job.done:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(job.task), args.timeout)
        return job.result()


class JobKillTool:
    name: str = "job_kill"
    description: str = "Stop a background job and everything it started."
    Args: type[ToolArgs] = JobKillArgs

    async def run(self, call: ToolCall) -> ToolResult:
        args = call.args
        assert isinstance(args, JobKillArgs)
        manager = _manager(call)
        job = manager.get(args.job_id, owner_of(call.agent)) if manager else None
        if job is None:
            return _unknown(args.job_id)
        if not job.done:
            job.running.kill_now()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(job.task), 5.0)
        return job.result()


__all__ = [
    "DEFAULT_WAIT",
    "JOBS_SERVICE",
    "MAX_JOBS",
    "CommandJob",
    "JobKillArgs",
    "JobKillTool",
    "JobManager",
    "JobOutputArgs",
    "JobOutputTool",
    "owner_of",
]
