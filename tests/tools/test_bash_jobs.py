"""Background jobs: ``bash`` with ``run_in_background``, ``job_output`` and ``job_kill``, confined
like foreground commands, scoped to the agent that started them, and killed with the plugin."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from proc_support import gone, processes_with
from tether._signals import AbortSignal
from tether.kernel import PluginHandle
from tether.kernel._config import resolve_plugin
from tether.kernel._plugin import Kernel
from tether.sandbox._backends import CLOSED_ROOT_NOTE
from tether.sandbox._control_names import DENIAL_NOTE
from tether.tools._base import ToolResult
from tether.tools._jobs import JOBS_SERVICE
from tether.tools._pipeline import TOOLS_SERVICE, ToolRuntime

pytestmark = pytest.mark.timeout(60)


@dataclass
class FakeHeader:
    cwd: str | None = None


@dataclass
class FakeSession:
    """What the policy services read of a session: no mode of its own, no cwd."""

    id: str
    header: FakeHeader = field(default_factory=FakeHeader)

    def last(self, event_type: str) -> None:
        return None


@dataclass
class FakeAgent:
    session: FakeSession


@dataclass
class Rig:
    kernel: Kernel
    tools: ToolRuntime
    bash: PluginHandle
    ws: Path

    async def call(self, name: str, agent: FakeAgent | None = None, **args: Any) -> ToolResult:
        return await self.tools.execute(agent, "c", name, json.dumps(args), AbortSignal())


@pytest.fixture(params=[pytest.param("bwrap", marks=pytest.mark.bwrap), "landlock"])
async def rig(ws: Path, request: pytest.FixtureRequest) -> AsyncIterator[Rig]:
    kernel = Kernel()
    kernel.load(
        resolve_plugin("sandbox_policy"), {"mode": "workspace-write", "workspace_root": str(ws)}
    )
    kernel.load(resolve_plugin("sandbox"), {"backends": [request.param], "disable": []})
    tools = ToolRuntime(kernel.ctx)
    kernel.ctx.provide(TOOLS_SERVICE, tools)
    handle = kernel.load(resolve_plugin("bash"))
    yield Rig(kernel, tools, handle, ws)
    jobs = kernel.ctx.get(JOBS_SERVICE)
    if jobs is not None:
        await jobs.aclose()
    kernel.dispose()


async def wait_for(token: str) -> None:
    for _ in range(200):
        if processes_with(token):
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the job's processes never appeared")


async def test_background_job_returns_an_id_then_its_result(rig: Rig) -> None:
    started = await rig.call(
        "bash", command="echo start; sleep 0.3; echo done", run_in_background=True
    )
    assert started.content == (
        "Started background job job-1. Read its output with job_output and stop it with job_kill."
    )
    assert started.details["job_id"] == "job-1"
    assert started.is_error is False
    finished = await rig.call("job_output", job_id="job-1", wait=True, timeout=10)
    assert finished.content == (
        "job job-1 (echo start; sleep 0.3; echo done)\nstart\ndone\nexit code: 0"
    )
    assert finished.details["status"] == "exited"
    assert finished.details["exit_code"] == 0


async def test_job_output_while_running_shows_partial_output(rig: Rig) -> None:
    token = uuid.uuid4().hex
    await rig.call(
        "bash",
        command=f"echo first; sh -c 'sleep 30; : {token}'",
        description="long sleeper",
        run_in_background=True,
    )
    await wait_for(token)
    for _ in range(100):
        running = await rig.call("job_output", job_id="job-1")
        if "first" in running.content:
            break
        await asyncio.sleep(0.02)
    assert running.content == "job job-1 (long sleeper)\nfirst\nstill running"
    assert running.details["status"] == "running"
    assert running.is_error is False


async def test_job_kill_stops_everything_the_job_started(rig: Rig) -> None:
    token = uuid.uuid4().hex
    await rig.call(
        "bash",
        command=f"setsid sh -c 'sleep 30; : {token}' & sh -c 'sleep 30; : {token}'",
        run_in_background=True,
    )
    await wait_for(token)
    killed = await rig.call("job_kill", job_id="job-1")
    assert killed.content == (
        f"job job-1 (setsid sh -c 'sleep 30; : {token}' & sh -c 'sleep 30; : {token}')\n"
        "killed: the command and everything it started were stopped"
    )
    assert killed.details["status"] == "killed"
    assert killed.is_error is True
    assert await gone(token) == []


async def test_background_job_is_confined_like_a_foreground_command(rig: Rig) -> None:
    outside = rig.ws.parent / "outside" / "bg.txt"
    await rig.call(
        "bash", command=f"echo in > src/in.txt; echo out > {outside}", run_in_background=True
    )
    result = await rig.call("job_output", job_id="job-1", wait=True)
    assert result.content.endswith(
        "exit code: 1\n[sandbox: file access denied under workspace-write mode]\n"
        + CLOSED_ROOT_NOTE
        + "\n"
        + DENIAL_NOTE
    )
    assert result.details["sandbox_denied"] is True
    assert (rig.ws / "src" / "in.txt").read_text() == "in\n"
    assert not outside.exists()


async def test_job_timeout_kills_it(rig: Rig) -> None:
    token = uuid.uuid4().hex
    await rig.call(
        "bash", command=f"sh -c 'sleep 30; : {token}'", timeout=0.5, run_in_background=True
    )
    result = await rig.call("job_output", job_id="job-1", wait=True, timeout=10)
    assert result.content.endswith(
        "timed out after 0.5 s: the command and everything it started were killed"
    )
    assert await gone(token) == []


async def test_jobs_belong_to_the_agent_that_started_them(rig: Rig) -> None:
    owner, other = FakeAgent(FakeSession("s-owner")), FakeAgent(FakeSession("s-other"))
    await rig.call("bash", owner, command="echo mine", run_in_background=True)
    assert (await rig.call("job_output", other, job_id="job-1")).content == (
        'Error: unknown job "job-1"'
    )
    assert (await rig.call("job_kill", other, job_id="job-1")).content == (
        'Error: unknown job "job-1"'
    )
    assert (await rig.call("job_output", None, job_id="job-1")).content == (
        'Error: unknown job "job-1"'
    )
    mine = await rig.call("job_output", owner, job_id="job-1", wait=True)
    assert mine.content == "job job-1 (echo mine)\nmine\nexit code: 0"


async def test_unloading_the_plugin_kills_running_jobs(rig: Rig) -> None:
    token = uuid.uuid4().hex
    await rig.call("bash", command=f"sh -c 'sleep 30; : {token}'", run_in_background=True)
    await wait_for(token)
    rig.bash.dispose()
    assert rig.tools.names() == []
    assert rig.kernel.ctx.get(JOBS_SERVICE) is None
    assert await gone(token) == []


async def test_closing_the_kernel_stops_and_awaits_a_running_job(rig: Rig) -> None:
    token = uuid.uuid4().hex
    await rig.call("bash", command=f"sh -c 'sleep 30; : {token}'", run_in_background=True)
    await wait_for(token)
    (job,) = rig.kernel.ctx.require(JOBS_SERVICE).jobs(None)
    assert len(rig.kernel.runtime.tasks) == 1  # the job's watcher is a task of the runtime
    await rig.kernel.aclose()
    assert job.done and len(rig.kernel.runtime.tasks) == 0
    assert job.result().details["status"] == "cancelled"
    assert await gone(token) == []


async def test_background_without_the_jobs_service_is_refused(ws: Path) -> None:
    kernel = Kernel()
    kernel.load(resolve_plugin("sandbox_policy"), {"mode": "read-only", "workspace_root": str(ws)})
    kernel.load(resolve_plugin("sandbox"), {"backends": ["landlock"]})
    tools = ToolRuntime(kernel.ctx)
    kernel.ctx.provide(TOOLS_SERVICE, tools)
    kernel.load(resolve_plugin("bash"), {"background": False})
    assert tools.names() == ["bash"]
    marker = ws / "src" / "ran.txt"
    result = await tools.execute(
        None,
        "c",
        "bash",
        json.dumps({"command": f"touch {marker}", "run_in_background": True}),
        AbortSignal(),
    )
    assert (
        result.content == "Error: background jobs are not available (no jobs service is composed)"
    )
    assert not marker.exists()
    kernel.dispose()
