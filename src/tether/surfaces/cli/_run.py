"""``tether run``: one root turn from the command line (``docs/design.md`` §5).

``--json`` prints one JSON object per line for every event of any session of the run once the
store has committed it, in commit order (``Harness.stream``), then ``{"type": "run/result",
...}`` after the last commit (``docs/reliability.md``). Exit status 0 when the root turn
completed; 3 when a turn reached ``--max-steps``, 4 when the run reached ``--max-turns``;
130/143 when SIGINT/SIGTERM stopped it (:mod:`._interrupts`); otherwise 1, each with a one-line
reason on stderr.
"""

from __future__ import annotations

import asyncio
import json
import math
import signal
import sys
import time
from collections.abc import Coroutine
from typing import Annotated, Final, Literal, NamedTuple

import typer

from tether._harness import Harness, RunResult, RunStopReason, SessionEvent
from tether.agent._events import UserMessage
from tether.agent._instructions import is_instructions
from tether.errors import TetherError
from tether.kernel import PluginEntry, WorkspaceTrust, WorkspaceUntrustedError
from tether.kernel._printable import printable, printable_block
from tether.kernel._workspace_files import read_file
from tether.kernel._workspace_trust import prompt_file_text
from tether.model._prices import price_of
from tether.plugins._approval_from_store import run_store_url
from tether.policy._sandbox_policy import SANDBOX_POLICY_SERVICE
from tether.session._json import thaw
from tether.surfaces.cli._common import JsonOption, StoreOption, error_line, fail, run, store_url
from tether.surfaces.cli._hook_warnings import warn_unused_hooks
from tether.surfaces.cli._id_prefix import LAST
from tether.surfaces.cli._interrupts import Interrupted, RunInterrupts, exit_status, resume_hint
from tether.surfaces.cli._model_choice import model_for_run, record_model_choice
from tether.surfaces.cli._progress import RunProgress
from tether.surfaces.cli._prompt_text import EmptyPromptError, read_prompt
from tether.surfaces.cli._run_totals import RunTotals
from tether.surfaces.cli._stream_json import (
    OUTPUT_FORMATS,
    OutputFormat,
    init_message,
    line,
    result_message,
    translate,
)
from tether.surfaces.cli._summary import format_summary, summarize
from tether.surfaces.cli._tty_answerer import live_session_names, register_tty_answerer

ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        metavar="SPEC",
        help="scripted:PATH, openai:MODEL, deepseek:MODEL or a model configured in tether.toml "
        "(default: $TETHER_MODEL, else the configured default).",
    ),
]
NoStreamOption = Annotated[
    bool,
    typer.Option(
        "--no-stream",
        help="Ask the model for whole replies instead of streams (for servers that cannot "
        "stream, e.g. with tools).",
    ),
]
ModelTimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--model-timeout",
        metavar="SECONDS",
        help="How long the model server may stay silent before the request fails "
        "(default: the model's timeout, else 120).",
        show_default=False,
    ),
]
WorkspaceOption = Annotated[
    str, typer.Option("--workspace", metavar="DIR", help="Workspace root (default: cwd).")
]
SandboxOption = Annotated[
    str | None,
    typer.Option(
        "--sandbox",
        metavar="MODE",
        help="read-only, workspace-write or danger-full-access (default: the preset's).",
    ),
]
ApprovalOption = Annotated[
    str | None, typer.Option("--approval", metavar="POLICY", help="ask or never.")
]
PermissionOption = Annotated[
    str | None,
    typer.Option(
        "--permission",
        metavar="PRESET",
        help="Start in a permission preset: workspace-write, read-only, plan or "
        "danger-full-access (as /permission in chat).",
    ),
]
ApproverOption = Annotated[
    str | None,
    typer.Option(
        "--approver",
        metavar="CMD",
        help="Program that answers approval requests (JSON on stdin; allowed-once/rejected out).",
    ),
]
PluginOption = Annotated[
    list[str] | None, typer.Option("--plugin", metavar="NAME", help="Load a plugin (repeatable).")
]
ApprovalFromOption = Annotated[
    str | None,
    typer.Option(
        "--approval-from",
        metavar="SOURCE",
        help="'store': wait for `tether approvals answer` from any terminal.",
    ),
]
ApprovalTimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--approval-timeout",
        metavar="SECONDS",
        help="With --approval-from store: how long each ask waits before it resolves "
        "unavailable (default 900; 0 waits until answered).",
        show_default=False,
    ),
]
ResumeOption = Annotated[
    str | None,
    typer.Option(
        "--resume",
        "-r",
        metavar="SESSION_ID",
        help="Continue a stored session: its id, a unique prefix of it, or 'last' (the newest "
        "session of this workspace).",
    ),
]
ContinueOption = Annotated[
    bool,
    typer.Option(
        "--continue",
        "-c",
        help="Continue the newest session of this workspace (same as --resume last).",
    ),
]
PrintOption = Annotated[
    str | None,
    typer.Option(
        "--print",
        "-p",
        metavar="PROMPT",
        help="The prompt, as an option (as claude -p takes it); instead of the PROMPT argument.",
    ),
]
SystemPromptFileOption = Annotated[
    str | None,
    typer.Option(
        "--system-prompt-file",
        metavar="PATH",
        help="Replace tether's system prompt with this file's text (UTF-8).",
    ),
]
AppendSystemPromptOption = Annotated[
    str | None,
    typer.Option(
        "--append-system-prompt",
        metavar="TEXT",
        help="Add TEXT after the system prompt.",
    ),
]
MaxStepsOption = Annotated[
    int | None,
    typer.Option(
        "--max-steps",
        metavar="N",
        min=1,
        help="Steps (model requests) one turn may take; past it the turn ends max-steps "
        "(default 50).",
        show_default=False,
    ),
]
MaxTurnsOption = Annotated[
    int | None,
    typer.Option(
        "--max-turns",
        metavar="N",
        min=1,
        help="Turns the run may take (follow-ups, Stop-hook continuations); past it the run "
        "ends max-turns (default: no limit).",
        show_default=False,
    ),
]
OutputFormatOption = Annotated[
    str,
    typer.Option(
        "--output-format",
        metavar="FORMAT",
        help="text (the reply; a line per tool call on stderr), json (one result object, as "
        "claude -p prints it) or stream-json (Claude Code's stream-json messages, one a line).",
    ),
]
EXIT_FOR_LIMIT: Final[dict[RunStopReason, int]] = {"max-steps": 3, "max-turns": 4}
"""The exit status of a run that stopped at a limit (``docs/cli.md``)."""

TrustWorkspaceOption = Annotated[
    bool,
    typer.Option(
        "--trust-workspace",
        help="Trust the workspace's configuration as it is now, for this run only (not recorded).",
    ),
]


class ScopeFlags(NamedTuple):
    """``--sandbox``, ``--approval`` and ``--permission``: the new root session's scope, as
    :meth:`Harness.open` takes it."""

    sandbox: str | None = None
    approval: str | None = None
    permission: str | None = None

    def check(self, command: str, resume: str | None) -> ScopeFlags:
        """These flags, or exit 2: a resumed session's scope is its log's, and a preset is
        given whole or as its two knobs, not both."""
        if resume and any(self):
            error_line(
                f"{command}: --sandbox/--approval/--permission cannot change a resumed session: "
                "its recorded scope is replayed from its log"
            )
            raise typer.Exit(2)
        if self.permission is not None and (self.sandbox or self.approval):
            error_line(
                f"{command}: --permission names both knobs; give it or --sandbox/--approval, "
                "not both"
            )
            raise typer.Exit(2)
        return self


def output_choice(output_format: str, json_output: bool) -> Shape:
    """``--output-format`` or ``--json`` (tether's own event log), not both."""
    if output_format not in OUTPUT_FORMATS:
        error_line(f"run: --output-format takes {', '.join(OUTPUT_FORMATS)}")
        raise typer.Exit(2)
    if json_output and output_format != "text":
        error_line("run: --json prints tether's event log; give it or --output-format, not both")
        raise typer.Exit(2)
    return "log" if json_output else output_format


def one_prompt(argument: str | None, option: str | None) -> str | None:
    """The prompt from the PROMPT argument or ``-p``/``--print``; both at once is an error."""
    if argument is not None and option is not None:
        error_line("run: give the prompt once: as PROMPT or with -p, not both")
        raise typer.Exit(2)
    return option if option is not None else argument


def resume_choice(resume: str | None, continue_last: bool) -> str | None:
    """``--resume`` or ``--continue`` (``--resume last``); both at once is an error."""
    if continue_last and resume is not None:
        error_line("--continue is --resume last: give one of them")
        raise typer.Exit(2)
    return LAST if continue_last else resume


def model_timeout_value(command: str, seconds: float | None) -> float | None:
    """``--model-timeout``, refused (exit 2) unless a positive, finite number of seconds."""
    if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
        error_line(f"{command}: --model-timeout takes a number of seconds above 0")
        raise typer.Exit(2)
    return seconds


def stream_flag(no_stream: bool) -> bool | None:
    """``--no-stream`` as ``Harness.open(stream=...)``: without it the model's configuration
    decides."""
    return False if no_stream else None


def system_prompt_text(path: str | None) -> str | None:
    """The text of ``--system-prompt-file``: the user names it, so it is read as theirs (a
    prompt changes no scope); a missing, unreadable or non-UTF-8 file is a one-line error."""
    if path is None:
        return None
    try:
        return prompt_file_text(
            f"--system-prompt-file {printable(path)}", read_file(path, path).require()
        )
    except TetherError as err:
        fail(err)


def plugin_entries(names: list[str] | None, approver: str | None) -> list[PluginEntry]:
    """``--plugin`` names, with ``--approver CMD`` as the first (answering) plugin."""
    plugins = [PluginEntry(name=p) for p in names or []]
    if approver:
        plugins.insert(0, PluginEntry(name="approver_command", config={"command": approver}))
    return plugins


def store_answerer(source: str, timeout: float | None) -> PluginEntry:
    """The ``approval_from_store`` entry for ``--approval-from``/``--approval-timeout``."""
    if source != "store":
        error_line("run: --approval-from takes 'store'")
        raise typer.Exit(2)
    config: dict[str, object] = {}
    if timeout is not None:
        if not math.isfinite(timeout) or timeout < 0:
            error_line("run: --approval-timeout takes a number of seconds, 0 or more")
            raise typer.Exit(2)
        config["timeout_seconds"] = timeout
    return PluginEntry(name="approval_from_store", config=config)


def run_command(
    prompt: Annotated[
        str | None, typer.Argument(metavar="[PROMPT]", help="The prompt for the root turn.")
    ] = None,
    print_prompt: PrintOption = None,
    model: ModelOption = None,
    workspace: WorkspaceOption = ".",
    store: StoreOption = None,
    sandbox: SandboxOption = None,
    approval: ApprovalOption = None,
    permission: PermissionOption = None,
    approver: ApproverOption = None,
    plugin: PluginOption = None,
    resume: ResumeOption = None,
    continue_last: ContinueOption = False,
    approval_from: ApprovalFromOption = None,
    approval_timeout: ApprovalTimeoutOption = None,
    trust_workspace: TrustWorkspaceOption = False,
    no_stream: NoStreamOption = False,
    model_timeout: ModelTimeoutOption = None,
    system_prompt_file: SystemPromptFileOption = None,
    append_system_prompt: AppendSystemPromptOption = None,
    max_steps: MaxStepsOption = None,
    max_turns: MaxTurnsOption = None,
    output_format: OutputFormatOption = "text",
    json_output: JsonOption = False,
) -> None:
    """Run one root turn and print its output."""
    shape = output_choice(output_format, json_output)
    prompt = one_prompt(prompt, print_prompt)
    resume = resume_choice(resume, continue_last)
    if prompt is None and sys.stdin.isatty():
        error_line("run: give a PROMPT argument (or pipe one on stdin)")
        raise typer.Exit(2)
    try:
        prompt = read_prompt(prompt)
    except EmptyPromptError as err:
        error_line(f"{err.code}: {err}")
        raise typer.Exit(2) from None
    scope = ScopeFlags(sandbox, approval, permission).check("run", resume)
    plugins = plugin_entries(plugin, approver)
    if approval_from is not None:
        plugins.insert(0, store_answerer(approval_from, approval_timeout))
    elif approval_timeout is not None:
        error_line("run: --approval-timeout applies to --approval-from store")
        raise typer.Exit(2)
    options = RunOptions(
        system_prompt_text(system_prompt_file),
        append_system_prompt,
        max_steps,
        max_turns,
        stream_flag(no_stream),
        model_timeout_value("run", model_timeout),
    )
    trust = WorkspaceTrust.ONCE if trust_workspace else WorkspaceTrust.RECORDED
    warn_unused_hooks(workspace, plugins, store_url(store), trust)
    result = run(
        _offering_one_run_trust(
            _run(
                prompt,
                model,
                workspace,
                store_url(store),
                scope,
                plugins,
                resume,
                shape,
                trust,
                options,
            )
        )
    )
    if isinstance(result, Interrupted):
        error_line(resume_hint(result.session_id))
        raise typer.Exit(exit_status(result.signum))
    if result.stop_reason == "max-turns":
        error_line(f"run: the run ended max-turns: {result.error}")
        raise typer.Exit(EXIT_FOR_LIMIT["max-turns"])
    if result.stop_reason != "completed":
        error_line(f"run: the turn ended {result.stop_reason}: {result.error or 'no detail'}")
        raise typer.Exit(EXIT_FOR_LIMIT.get(result.stop_reason, 1))


Shape = OutputFormat | Literal["log"]
"""What ``run`` prints: an ``--output-format``, or ``log`` for ``--json`` (tether's events)."""


class RunOptions(NamedTuple):
    """What ``run`` and ``chat`` pass to :meth:`Harness.open` for the prompt, the limits and
    streaming."""

    system_prompt: str | None = None
    append_system_prompt: str | None = None
    max_steps: int | None = None
    max_turns: int | None = None
    stream: bool | None = None
    """``False`` for ``--no-stream``; ``None`` lets the model's configuration decide."""
    model_timeout: float | None = None
    """``--model-timeout``: the model's read timeout in seconds."""


async def _offering_one_run_trust(
    run: Coroutine[object, object, RunResult | Interrupted],
) -> RunResult | Interrupted:
    try:
        return await run
    except WorkspaceUntrustedError as err:
        raise err.also("pass --trust-workspace to trust this content for this run only") from None


async def _run(
    prompt: str,
    model: str | None,
    workspace: str,
    store: str,
    scope: ScopeFlags,
    plugins: list[PluginEntry],
    resume: str | None,
    shape: Shape,
    workspace_trust: WorkspaceTrust,
    options: RunOptions,
) -> RunResult | Interrupted:
    opened: list[Harness] = []
    interrupts = RunInterrupts(lambda: opened[0].root if opened else None)
    try:
        with interrupts:
            return await _run_in(
                opened,
                prompt,
                model,
                workspace,
                store,
                scope,
                plugins,
                resume,
                shape,
                workspace_trust,
                options,
            )
    except asyncio.CancelledError:
        if not interrupts.stopped():
            raise
        root = opened[0].root if opened else None
        return Interrupted(interrupts.received or signal.SIGINT, root.id if root else None)


async def _run_in(
    opened: list[Harness],
    prompt: str,
    model: str | None,
    workspace: str,
    store: str,
    scope: ScopeFlags,
    plugins: list[PluginEntry],
    resume: str | None,
    shape: Shape,
    workspace_trust: WorkspaceTrust,
    options: RunOptions,
) -> RunResult:
    started = time.monotonic()
    chosen, resume, used = await model_for_run(
        store, resume, workspace, model, options.stream, options.model_timeout
    )
    model = used.model
    options = options._replace(stream=used.stream, model_timeout=used.model_timeout)
    async with Harness.open(
        workspace=workspace,
        model=model,
        store=store,
        plugins=plugins,
        workspace_trust=workspace_trust,
        **scope._asdict(),
        **options._asdict(),
    ) as harness:
        opened.append(harness)
        if resume is None:
            # Created here rather than by the run so the model choice precedes the first turn.
            harness.root = harness.agent_for(harness.new_root_session())
            record_model_choice(harness.root.session, chosen)
        answered = {"approver_command", "approval_from_store"}
        at_keyboard = not any(p.name in answered for p in plugins) and sys.stdin.isatty()
        if shape == "text":
            interactive = sys.stdout.isatty()
            with RunProgress(harness, interactive=interactive) as progress:
                if at_keyboard:
                    _answer_at_keyboard(harness, progress)
                result = await harness.run(prompt, resume=resume)
            if result.output and not progress.streamed:
                # To a terminal the output is shown escaped; to a pipe or a file it is data.
                shown = printable_block(result.output) if interactive else result.output
                typer.echo(shown)
            for item in progress.events:
                if item.session_id == result.session_id and is_instructions(item.event):
                    loaded = UserMessage.parse(item.event.data).source_text("summary")
                    if loaded is not None:
                        typer.echo(f"tether: {printable(loaded)}", err=True)
            summary = summarize(
                progress.events, root_id=result.session_id, elapsed=progress.elapsed()
            )
            typer.echo(f"tether: {format_summary(summary)} · session {result.session_id}", err=True)
            return result
        if at_keyboard:
            _answer_at_keyboard(harness, None)
        return await _stream(harness, prompt, resume, shape, model, started)


def _answer_at_keyboard(harness: Harness, screen: RunProgress | None) -> None:
    """Approvals asked by this run are answered at its terminal (and from any other)."""
    register_tty_answerer(
        harness.ctx,
        name=live_session_names(harness),
        store=run_store_url(harness.ctx),
        screen=screen,
    )


async def _stream(
    harness: Harness,
    prompt: str,
    resume: str | None,
    shape: Shape,
    model: str | None,
    started: float,
) -> RunResult:
    """The run as committed events: tether's log (``--json``) or Claude Code's messages."""
    assert harness.root is not None or resume is not None
    totals = RunTotals()
    label = str(getattr(harness.model, "model", None) or model or "default")
    async for event in harness.stream(prompt, resume=resume):
        root = harness.root
        assert root is not None
        if totals.root_id is None:
            totals.root_id = root.id
            if shape == "stream-json":
                typer.echo(_init_line(harness, label))
        totals.add(event)
        if shape == "log":
            typer.echo(_line(event))
        elif shape == "stream-json" and (message := translate(event, root.id, label)):
            typer.echo(line(message))
    assert harness.root is not None
    if shape == "stream-json" and totals.root_id is None:
        typer.echo(_init_line(harness, label))  # a run that committed nothing still opens
    result = Harness.result_of(harness.root)
    used = totals.fields(round((time.monotonic() - started) * 1000), price_of(harness.model))
    if shape != "log":
        typer.echo(line(result_message(result, used)))
        return result
    typer.echo(
        json.dumps(
            {
                "type": "run/result",
                "session": result.session_id,
                "stop_reason": result.stop_reason,
                "output": result.output,
                **({"error": result.error} if result.error else {}),
                **used,
            },
            ensure_ascii=False,
        )
    )
    return result


def _init_line(harness: Harness, label: str) -> str:
    assert harness.root is not None
    policy = harness.ctx.require(SANDBOX_POLICY_SERVICE).resolve(harness.root.session)
    return line(
        init_message(
            harness.root.id,
            cwd=harness.workspace,
            model=label,
            tools=harness.tools.names(),
            mode=policy.mode.value,
        )
    )


def _line(item: SessionEvent) -> str:
    event = item.event
    return json.dumps(
        {
            "session": item.session_id,
            "seq": event.seq,
            "type": event.type,
            "data": thaw(event.data),
        },
        ensure_ascii=False,
    )
