"""The ``bash`` tool: confinement through the sandbox service, output limits, timeouts,
cancellation that kills the process group, exit status, the denial marker, and runner failures
reported as infrastructure failures."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from proc_support import gone, processes_with
from runner_support import passing_runner
from tether._signals import AbortSignal
from tether.kernel import Context, Runtime
from tether.kernel._config import resolve_plugin
from tether.kernel._plugin import Kernel
from tether.policy import SandboxExecutionPolicy, SandboxMode
from tether.sandbox import SANDBOX_SERVICE, SandboxProvider
from tether.sandbox._backends import CLOSED_ROOT_NOTE
from tether.sandbox._control_names import DENIAL_NOTE
from tether.tools._base import ToolCall, ToolResult
from tether.tools._bash import BashTool
from tether.tools._pipeline import TOOLS_SERVICE, ToolRuntime

pytestmark = pytest.mark.timeout(60)

BACKENDS = [pytest.param("bwrap", marks=pytest.mark.bwrap), "landlock"]
MARKER_RO = "[sandbox: file access denied under read-only mode]"


def policy(ws: Path, mode: str) -> SandboxExecutionPolicy:
    return SandboxExecutionPolicy(SandboxMode(mode), str(ws), "s-test")


def context(provider: SandboxProvider | None) -> Context:
    ctx = Runtime().root
    if provider is not None:
        ctx.provide(SANDBOX_SERVICE, provider)
    return ctx


def provider_for(backend: str) -> SandboxProvider:
    provider = SandboxProvider(backends=(backend,), disable=())
    assert provider.backend_name() == backend, provider.reasons()
    return provider


def call(
    ctx: Context,
    pol: SandboxExecutionPolicy | None,
    signal: AbortSignal | None = None,
    tool: BashTool | None = None,
    **args: Any,
) -> tuple[BashTool, ToolCall]:
    tool = tool or BashTool()
    return tool, ToolCall(
        call_id="call-1",
        name="bash",
        args=tool.Args.model_validate(args),
        raw_arguments=json.dumps(args),
        agent=None,
        signal=signal or AbortSignal(),
        ctx=ctx,
        policy=pol,
    )


async def run(ctx: Context, pol: SandboxExecutionPolicy | None, **args: Any) -> ToolResult:
    tool, c = call(ctx, pol, **args)
    return await tool.run(c)


# -- results ----------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
async def test_success_output_and_exit_code(ws: Path, backend: str) -> None:
    result = await run(
        context(provider_for(backend)), policy(ws, "read-only"), command="echo hi; pwd"
    )
    # success with output is the output alone (the reference's text; docs/decisions/0046)
    assert result.content == f"hi\n{ws}"
    assert result.is_error is False
    assert result.details["exit_code"] == 0
    assert result.details["backend"] == backend
    assert result.details["mode"] == "read-only"
    assert "sandbox_denied" not in result.details


@pytest.mark.parametrize("backend", BACKENDS)
async def test_failure_reports_exit_code_and_stderr(ws: Path, backend: str) -> None:
    result = await run(
        context(provider_for(backend)),
        policy(ws, "read-only"),
        command="echo out; echo oops >&2; exit 3",
    )
    assert result.content == "out\n[stderr]\noops\nexit code: 3"
    assert result.is_error is True
    assert result.details["exit_code"] == 3


async def test_stdin_is_dev_null(ws: Path) -> None:
    result = await run(context(None), policy(ws, "danger-full-access"), command="cat; echo end")
    assert result.content == "end"


async def test_death_by_signal_is_reported(ws: Path) -> None:
    result = await run(
        context(provider_for("landlock")), policy(ws, "read-only"), command="kill -KILL $$"
    )
    assert result.content == "terminated by SIGKILL"
    assert result.details["signal"] == "SIGKILL"
    assert result.details["exit_code"] is None
    assert result.is_error is True


@pytest.mark.parametrize("backend", BACKENDS)
async def test_api_keys_never_reach_the_command(
    ws: Path, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-ds-secret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-oa-secret")
    for mode in ("read-only", "workspace-write"):
        result = await run(context(provider_for(backend)), policy(ws, mode), command="env")
        assert "sk-ds-secret" not in result.content and "sk-oa-secret" not in result.content
    result = await run(context(None), policy(ws, "danger-full-access"), command="env")
    assert "sk-ds-secret" not in result.content and "sk-oa-secret" not in result.content


# -- output limits ------------------------------------------------------------------------------
async def test_long_output_keeps_head_and_tail(ws: Path) -> None:
    tool = BashTool(output_limit=3000)  # stdout keeps 2000 bytes: 1000 head, 1000 tail
    script = "for i in $(seq 1 2000); do printf 'line %05d\\n' $i; done"
    t, c = call(context(None), policy(ws, "danger-full-access"), tool=tool, command=script)
    result = await t.run(c)
    total = 2000 * 11
    head = "".join(f"line {i:05d}\n" for i in range(1, 2001))[:1000]
    tail = "".join(f"line {i:05d}\n" for i in range(1, 2001))[-1000:]
    assert result.content == (
        f"{head}\n[... {total - 2000} bytes omitted ...]\n{tail.rstrip(chr(10))}"
    )
    assert result.details["stdout_bytes"] == total


async def test_denial_in_the_omitted_middle_is_still_found(ws: Path) -> None:
    tool = BashTool(output_limit=1200)  # stderr keeps 400 bytes
    script = (
        "head -c 5000 /dev/zero | tr '\\0' a >&2; echo >&2; echo x > /etc/tether-bash-probe; "
        "head -c 5000 /dev/zero | tr '\\0' b >&2"
    )
    t, c = call(
        context(provider_for("landlock")), policy(ws, "read-only"), tool=tool, command=script
    )
    result = await t.run(c)
    assert "Permission denied" not in result.content  # cut from the kept output...
    assert result.details["sandbox_denied"] is True  # ...but seen while streaming
    assert result.content.endswith(f"exit code: 0\n{MARKER_RO}")
    assert not os.path.exists("/etc/tether-bash-probe")


# -- denial and runner failure --------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
async def test_denied_write_gets_the_marker_separately_from_the_exit_code(
    ws: Path, backend: str
) -> None:
    outside = ws.parent / "outside" / "x.txt"
    result = await run(
        context(provider_for(backend)), policy(ws, "read-only"), command=f"echo x > {outside}"
    )
    signature = "Read-only file system" if backend == "bwrap" else "Permission denied"
    assert result.content == (
        f"[stderr]\nbash: line 1: {outside}: {signature}\nexit code: 1\n{MARKER_RO}"
    )
    assert result.details["sandbox_denied"] is True
    assert result.details["exit_code"] == 1
    assert result.is_error is True
    assert not outside.exists()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_workspace_write_denial_names_its_mode(ws: Path, backend: str) -> None:
    outside = ws.parent / "outside" / "x.txt"
    result = await run(
        context(provider_for(backend)),
        policy(ws, "workspace-write"),
        command=f"echo ok > src/inside.txt; echo x > {outside}",
    )
    assert result.content.endswith(
        "[sandbox: file access denied under workspace-write mode]\n"
        + CLOSED_ROOT_NOTE
        + "\n"
        + DENIAL_NOTE
    )
    assert (ws / "src" / "inside.txt").read_text() == "ok\n"
    assert not outside.exists()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_new_entry_in_the_workspace_root_is_denied_with_a_way_out(
    ws: Path, backend: str
) -> None:
    result = await run(
        context(provider_for(backend)), policy(ws, "workspace-write"), command="touch new.txt"
    )
    error = "Read-only file system" if backend == "bwrap" else "Permission denied"
    assert result.content == (
        f"[stderr]\ntouch: cannot touch 'new.txt': {error}\nexit code: 1\n"
        "[sandbox: file access denied under workspace-write mode]\n"
        "[sandbox: commands cannot create, remove or rename entries directly in the workspace "
        "root; its existing files and everything inside its existing directories stay "
        "writable. The write and edit tools can create files there (writing a file into a new "
        "directory creates the directory for the next command)]\n"
        "[sandbox: commands cannot create entries named like control files (.git, .claude, "
        ".codex, .mcp.json, tether.toml, a git hook manager's) at any depth, nor change "
        "anything inside one or inside a git directory: git, Claude Code or Codex started "
        "there would act on them outside the sandbox. git init and git clone need "
        "danger-full-access]"
    )
    assert result.details["sandbox_denied"] is True
    assert sorted(os.listdir(ws)) == ["src"]


@pytest.mark.parametrize("backend", BACKENDS)
async def test_git_init_in_a_subdirectory_is_a_denial_with_the_note(ws: Path, backend: str) -> None:
    result = await run(
        context(provider_for(backend)), policy(ws, "workspace-write"), command="git init -q src"
    )
    error = "Read-only file system" if backend == "bwrap" else "Permission denied"
    assert f"{error}" in result.content
    assert result.content.endswith(
        "[sandbox: file access denied under workspace-write mode]\n"
        + CLOSED_ROOT_NOTE
        + "\n"
        + DENIAL_NOTE
    )
    assert result.details["sandbox_denied"] is True
    assert not os.path.lexists(ws / "src" / ".git")


@pytest.mark.bwrap
async def test_removing_a_bound_entry_counts_as_a_denial(ws: Path) -> None:
    """With the root open (``open_workspace_root``), control entries are bound read-only over
    it: removing one fails with EBUSY, which is a sandbox denial like EROFS."""
    (ws / ".git").mkdir()
    provider = SandboxProvider(backends=("bwrap",), disable=(), open_workspace_root=True)
    result = await run(context(provider), policy(ws, "workspace-write"), command="rmdir .git")
    assert result.content == (
        "[stderr]\nrmdir: failed to remove '.git': Device or resource busy\nexit code: 1\n"
        "[sandbox: file access denied under workspace-write mode]\n" + DENIAL_NOTE
    )
    assert (ws / ".git").is_dir()


async def test_no_marker_without_confinement(ws: Path) -> None:
    result = await run(
        context(None),
        policy(ws, "danger-full-access"),
        command="echo 'x: Read-only file system' >&2; echo 'y: Permission denied' >&2; exit 1",
    )
    assert result.content == (
        "[stderr]\nx: Read-only file system\ny: Permission denied\nexit code: 1"
    )
    assert "sandbox_denied" not in result.details


@pytest.mark.bwrap
async def test_missing_runner_is_infrastructure_failure(ws: Path, tmp_path: Path) -> None:
    runner, _ = passing_runner(tmp_path, "exit 1")
    provider = SandboxProvider(runner_command=str(runner), disable="landlock")
    assert provider.backend_name() == "bwrap"  # probed while it was there
    runner.unlink()
    marker = ws / "src" / "ran.txt"
    result = await run(context(provider), policy(ws, "read-only"), command=f"touch {marker}")
    assert result.content == (
        "Error: SANDBOX_UNAVAILABLE: cannot execute the sandbox runner "
        f"{runner}: No such file or directory; the command was not run"
    )
    assert result.is_error is True
    assert result.details["sandbox_unavailable"] is True
    assert result.details["code"] == "SANDBOX_UNAVAILABLE"
    assert "sandbox_denied" not in result.details
    assert not marker.exists()


@pytest.mark.bwrap
async def test_runner_setup_error_is_infrastructure_failure_not_denial(
    ws: Path, tmp_path: Path
) -> None:
    runner, armed = passing_runner(
        tmp_path, "echo 'bwrap: Can'\"'\"'t bind mount /: Read-only file system' >&2; exit 1"
    )
    provider = SandboxProvider(runner_command=str(runner), disable="landlock")
    assert provider.backend_name() == "bwrap"
    armed.touch()
    result = await run(context(provider), policy(ws, "read-only"), command="true")
    assert result.content == (
        "Error: SANDBOX_UNAVAILABLE: bubblewrap could not set up the sandbox: "
        "bwrap: Can't bind mount /: Read-only file system; the command did not run"
    )
    assert result.details["reasons"] == {
        "bwrap": "bubblewrap could not set up the sandbox: bwrap: Can't bind mount /: "
        "Read-only file system"
    }
    assert "[sandbox:" not in result.content


@pytest.mark.bwrap
async def test_runner_inside_the_workspace_is_refused_cleanly(ws: Path) -> None:
    runner, _ = passing_runner(ws / "src", "exit 1")
    provider = SandboxProvider(runner_command=str(runner), disable="landlock")
    marker = ws / "src" / "ran.txt"
    result = await run(context(provider), policy(ws, "workspace-write"), command=f"touch {marker}")
    assert result.content == (
        f"Error: SANDBOX_CONFIG: the sandbox runner {runner} lies inside the workspace {ws}, "
        "where a confined command could rewrite it and run unconfined next time; install it "
        "outside the workspace (for example in /usr/local/bin) and point runner_command or "
        "bwrap_path there; the command was not run"
    )
    assert result.details == {"code": "SANDBOX_CONFIG"}
    assert not marker.exists()


@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
async def test_no_backend_refuses_and_never_runs(
    ws: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TETHER_SANDBOX_DISABLE", "bwrap,landlock")
    marker = ws / "ran.txt"
    result = await run(context(SandboxProvider()), policy(ws, mode), command=f"touch {marker}")
    assert result.content == (
        f"Error: SANDBOX_UNAVAILABLE: no sandbox backend can enforce {mode} mode (bwrap: disabled "
        "by TETHER_SANDBOX_DISABLE/config; landlock: disabled by TETHER_SANDBOX_DISABLE/config); "
        "the command was not run"
    )
    assert result.details["mode"] == mode
    assert not marker.exists()


@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
async def test_no_sandbox_service_fails_closed(ws: Path, mode: str) -> None:
    marker = ws / "ran.txt"
    result = await run(context(None), policy(ws, mode), command=f"touch {marker}")
    assert result.content == (
        f"Error: SANDBOX_UNAVAILABLE: no sandbox service is composed, so commands cannot run "
        f"under {mode} mode; the command was not run"
    )
    assert not marker.exists()


async def test_danger_without_a_service_runs_plainly(ws: Path) -> None:
    target = ws.parent / "outside" / "plain.txt"
    result = await run(
        context(None), policy(ws, "danger-full-access"), command=f"echo p > {target}"
    )
    assert result.content == "exit code: 0"
    assert result.details["backend"] == "none"
    assert target.read_text() == "p\n"


async def test_no_policy_refuses(ws: Path) -> None:
    result = await run(context(provider_for("landlock")), None, command="true")
    assert result.content == "Error: no sandbox policy is composed; commands are refused"


async def test_execute_takes_the_effective_policy(ws: Path) -> None:
    """The escalation ladder widens one call by passing a wider policy to ``execute``."""
    tool, c = call(
        context(provider_for("landlock")), policy(ws, "read-only"), command="echo w > src/w.txt"
    )
    denied = await tool.run(c)
    assert denied.details["sandbox_denied"] is True
    granted = await tool.execute(c, policy(ws, "workspace-write"))
    assert granted.content == "exit code: 0"
    assert (ws / "src" / "w.txt").read_text() == "w\n"


# -- timeout and cancellation kill the whole group ----------------------------------------------
MODES_AND_BACKENDS = [
    pytest.param("bwrap", "workspace-write", marks=pytest.mark.bwrap, id="bwrap"),
    pytest.param("landlock", "workspace-write", id="landlock"),
    pytest.param(None, "danger-full-access", id="plain"),
]


def _sleepers(token: str) -> str:
    # A child in the group, and one that left it with setsid (only a sandbox catches that one).
    return f"sh -c 'sleep 30; : {token}' & setsid sh -c 'sleep 30; : {token}' & sleep 30"


async def _wait_for(token: str, count: int) -> None:
    for _ in range(200):
        if len(processes_with(token)) >= count:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"the command's processes never appeared: {processes_with(token)}")


@pytest.mark.parametrize(("backend", "mode"), MODES_AND_BACKENDS)
async def test_timeout_kills_the_process_group(ws: Path, backend: str | None, mode: str) -> None:
    token = uuid.uuid4().hex
    ctx = context(provider_for(backend) if backend else None)
    script = _sleepers(token) if backend else f"sh -c 'sleep 30; : {token}' & sleep 30"
    result = await run(ctx, policy(ws, mode), command=script, timeout=1)
    assert result.content == (
        "timed out after 1 s: the command and everything it started were killed"
    )
    assert result.details["timed_out"] is True
    assert result.details["exit_code"] is None
    assert result.is_error is True
    assert await gone(token) == []


@pytest.mark.parametrize(("backend", "mode"), MODES_AND_BACKENDS)
async def test_abort_signal_kills_the_process_group(
    ws: Path, backend: str | None, mode: str
) -> None:
    token = uuid.uuid4().hex
    ctx = context(provider_for(backend) if backend else None)
    script = _sleepers(token) if backend else f"sh -c 'sleep 30; : {token}' & sleep 30"
    signal = AbortSignal()
    tool, c = call(ctx, policy(ws, mode), signal=signal, command=script)
    task = asyncio.ensure_future(tool.run(c))
    await _wait_for(token, 2 if backend else 1)
    signal.abort("user pressed stop")
    result = await task
    assert result.content == "cancelled: the command and everything it started were killed"
    assert result.details["cancelled"] is True
    assert await gone(token) == []


@pytest.mark.parametrize(("backend", "mode"), MODES_AND_BACKENDS)
async def test_task_cancellation_kills_the_process_group(
    ws: Path, backend: str | None, mode: str
) -> None:
    token = uuid.uuid4().hex
    ctx = context(provider_for(backend) if backend else None)
    script = _sleepers(token) if backend else f"sh -c 'sleep 30; : {token}' & sleep 30"
    tool, c = call(ctx, policy(ws, mode), command=script)
    task = asyncio.ensure_future(tool.run(c))
    await _wait_for(token, 2 if backend else 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await gone(token) == []


# -- through the kernel and the pipeline ---------------------------------------------------------
async def test_plugins_compose_bash_into_the_pipeline(ws: Path) -> None:
    kernel = Kernel()
    kernel.load(resolve_plugin("sandbox_policy"), {"mode": "read-only", "workspace_root": str(ws)})
    kernel.load(resolve_plugin("sandbox"), {"backends": ["landlock"]})
    tools = ToolRuntime(kernel.ctx)
    kernel.ctx.provide(TOOLS_SERVICE, tools)
    handle = kernel.load(resolve_plugin("bash"))
    assert tools.names() == ["bash", "job_output", "job_kill"]
    outside = ws.parent / "outside" / "p.txt"
    result = await tools.execute(
        None, "c1", "bash", json.dumps({"command": f"echo x > {outside}"}), AbortSignal()
    )
    # With no agent the call cannot escalate, so the hint says so (docs/decisions/0009).
    assert f"exit code: 1\n{MARKER_RO}\nEscalation is unavailable in this session" in result.content
    assert not outside.exists()
    bad = await tools.execute(
        None, "c2", "bash", json.dumps({"command": "true", "timeout": 601}), AbortSignal()
    )
    assert bad.content.startswith('Error: invalid arguments for tool "bash": timeout:')
    handle.dispose()
    assert tools.names() == []
    kernel.dispose()
