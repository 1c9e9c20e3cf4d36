"""``bash``: run a shell command under the OS sandbox.

The command runs as ``bash -c COMMAND`` through the ``sandbox`` service's ``confine`` (looked
up at the moment of use), in the call's workspace, in its own process group, stdin from
``/dev/null``. Output is bounded (head and tail kept), a timeout or a cancellation kills
everything the command started, and the exit status is reported. The result says separately:

* ``exit code: N`` (or the signal / the timeout); a command that exited 0 with output shows
  just its output,
* ``[sandbox: file access denied under <mode> mode]`` when stderr carries one of the backend's
  denial signatures (details ``sandbox_denied``),
* ``Error: SANDBOX_UNAVAILABLE: ...`` when the sandbox itself could not run the command (no
  backend, a runner that cannot execute, a runner-failure rule): an infrastructure failure,
  never reported as a denial and never retried unconfined.

The body is :meth:`BashTool.execute`, which takes the *effective* policy explicitly: the
call's, which the pipeline widened for this call only when the escalation ladder
(``policy/_escalation.py``) granted it.
"""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from tether.kernel import Context
from tether.policy import SandboxExecutionPolicy, SandboxMode
from tether.policy._escalation import EffectNoun
from tether.sandbox import (
    SANDBOX_SERVICE,
    ConfinedCommand,
    SandboxError,
    SandboxUnavailableError,
    unconfined,
)
from tether.tools._base import Tool, ToolArgs, ToolCall, ToolResult
from tether.tools._command_run import (
    MAX_TIMEOUT,
    OUTPUT_LIMIT,
    RunningCommand,
    render,
    unavailable_result,
)
from tether.tools._jobs import JOBS_SERVICE, JobKillTool, JobManager, JobOutputTool
from tether.tools._pipeline import TOOLS_SERVICE

DEFAULT_TIMEOUT: Final = 120.0
SHELL: Final = "bash"

NO_POLICY_REASON: Final = "no sandbox policy is composed; commands are refused"


class BashArgs(ToolArgs):
    command: str = Field(min_length=1, description="The shell command line (run by bash -c).")
    timeout: float | None = Field(
        default=None,
        gt=0,
        le=MAX_TIMEOUT,
        description=(
            f"Seconds before the command and everything it started are killed (default "
            f"{DEFAULT_TIMEOUT:g}, max {MAX_TIMEOUT:g}). Background jobs have no default limit."
        ),
    )
    description: str | None = Field(
        default=None, description="A few words saying what the command does."
    )
    run_in_background: bool = Field(
        default=False,
        description=(
            "Start the command as a background job and return its id at once; read it with "
            "job_output, stop it with job_kill."
        ),
    )


# -- the tool -----------------------------------------------------------------------------------
def confine_command(
    call: ToolCall, argv: list[str], policy: SandboxExecutionPolicy
) -> ConfinedCommand:
    """``argv`` confined under ``policy`` by the ``sandbox`` service (looked up now).

    Without the service only ``danger-full-access`` may run (plainly); a restricted mode
    raises :class:`SandboxUnavailableError`.
    """
    provider = call.ctx.get(SANDBOX_SERVICE)
    if provider is None:
        if policy.mode is SandboxMode.DANGER_FULL_ACCESS:
            return unconfined(argv)
        raise SandboxUnavailableError(
            f"no sandbox service is composed, so commands cannot run under {policy.mode.value} "
            "mode; the command was not run",
            mode=policy.mode.value,
            reasons={"sandbox": "service not composed"},
        )
    command: ConfinedCommand = provider.confine(argv, policy)
    return command


class BashTool:
    name: str = "bash"
    escalation_noun: EffectNoun = "command"
    description: str = (
        "Run a shell command with bash in the workspace directory and return its output and "
        "exit code. The command runs under the OS sandbox of the session's mode: writes outside "
        "what the mode allows fail, there is no network, and API keys are not in the "
        "environment. Output is truncated in the middle when long. Use run_in_background for "
        "long-running processes, then job_output / job_kill."
    )
    Args: type[ToolArgs] = BashArgs

    def __init__(
        self,
        *,
        default_timeout: float = DEFAULT_TIMEOUT,
        output_limit: int = OUTPUT_LIMIT,
        args_model: type[BashArgs] = BashArgs,
    ) -> None:
        self.default_timeout = default_timeout
        self.output_limit = output_limit
        self.Args = args_model

    async def run(self, call: ToolCall) -> ToolResult:
        if call.policy is None:
            return ToolResult.error(NO_POLICY_REASON)
        return await self.execute(call, call.policy)

    async def execute(self, call: ToolCall, policy: SandboxExecutionPolicy) -> ToolResult:
        """Run the call's command under ``policy`` (the call's effective one, or a mode granted
        for this call only)."""
        args = call.args
        if not isinstance(args, BashArgs):
            raise TypeError(f"bash: expected BashArgs, got {type(args).__name__}")
        argv = [SHELL, "-c", args.command]
        jobs: JobManager | None = None
        if args.run_in_background:
            jobs = call.ctx.get(JOBS_SERVICE)
            if jobs is None:
                return ToolResult.error(
                    "background jobs are not available (no jobs service is composed)"
                )
        try:
            command = confine_command(call, argv, policy)
            running = await RunningCommand.start(
                command, cwd=policy.workspace_root, limit=self.output_limit
            )
        except SandboxUnavailableError as err:
            return unavailable_result(err)
        except SandboxError as err:
            return ToolResult.error(f"{err.code}: {err}; the command was not run", code=err.code)
        except OSError as err:
            return ToolResult.error(f"cannot start {SHELL}: {err.strerror or err}")
        if jobs is not None:
            job = jobs.add_command(call, running, args.command, args.description, args.timeout)
            return ToolResult(
                f"Started background job {job.id}. Read its output with job_output and stop it "
                "with job_kill.",
                details={"job_id": job.id, "mode": command.mode.value, "backend": command.backend},
            )
        timeout = args.timeout or self.default_timeout
        outcome = await running.wait(timeout, call.signal)
        return render(outcome, command, timeout, quiet_success=True)


__all__ = [
    "DEFAULT_TIMEOUT",
    "NO_POLICY_REASON",
    "BashArgs",
    "BashConfig",
    "BashPlugin",
    "BashTool",
    "confine_command",
    "plugin",
]


# -- plugin -------------------------------------------------------------------------------------
class BashConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    default_timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0, le=MAX_TIMEOUT)
    output_limit: int = Field(default=OUTPUT_LIMIT, ge=1000)
    background: bool = True
    """Provide the ``jobs`` service and the ``job_output`` / ``job_kill`` tools."""


class BashPlugin:
    """Registers ``bash`` (and the job tools) into the ``tools`` runtime; provides ``jobs``.

    Commands are confined by the ``sandbox`` service, looked up per call: loading this plugin
    without the ``sandbox`` plugin is allowed, and every restricted call then fails closed.
    """

    name = "bash"
    requires = (TOOLS_SERVICE,)
    config_model = BashConfig

    def apply(self, ctx: Context, config: BashConfig) -> None:
        tools = ctx.get(TOOLS_SERVICE)
        if tools is None:  # ``requires`` checked it at load; it was withdrawn since
            raise RuntimeError("the bash plugin needs the tools service")
        registered: list[Tool] = [
            BashTool(default_timeout=config.default_timeout, output_limit=config.output_limit)
        ]
        if config.background:
            manager = JobManager()
            ctx.provide(JOBS_SERVICE, manager)
            ctx.effect(manager.close)
            registered += [JobOutputTool(), JobKillTool()]
        for tool in registered:
            # The runtime ties a registration to its own context; unloading this plugin must
            # remove the tools too.
            ctx.effect(tools.register(tool).dispose)


plugin: Final = BashPlugin()
