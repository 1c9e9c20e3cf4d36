"""``tether chat``: an interactive session at the terminal (``docs/design.md`` §5).

Between turns a prompt_toolkit prompt reads a line (with history and a status toolbar): a
slash command runs at once (:mod:`._commands`); anything else is one root turn. While the turn
runs, a small prompt_toolkit application owns the bottom of the screen: the streamed text of
the running agents, the status line (elapsed time, the running tool, children running or
blocked) and, when an approval is asked, the question's keys. Everything the run appends is
printed above it with rich (:mod:`._render`), and a one-line summary closes each turn
(:mod:`._summary`).

Keys during a turn: Ctrl-C cancels the root's turn (``root.cancel("user")``; the session and
its background children go on); a second Ctrl-C within two seconds quits. At the prompt,
Ctrl-C clears a typed line, and on an empty line quits, as does Ctrl-D.

Approvals asked while a turn runs are answered at this keyboard (:mod:`._prompts`) unless
``--approver`` names a program to answer them.
"""

from __future__ import annotations

import asyncio
import io
import logging
import signal
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Annotated, Final, cast

import typer
from prompt_toolkit import PromptSession
from prompt_toolkit.application import Application, get_app, get_app_or_none, run_in_terminal
from prompt_toolkit.application.current import get_app_session
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.keys import Keys
from prompt_toolkit.layout import (
    BufferControl,
    ConditionalContainer,
    FormattedTextControl,
    HSplit,
    Layout,
    Window,
)
from prompt_toolkit.layout.processors import BeforeInput
from prompt_toolkit.output import Output
from rich.console import Console
from rich.text import Text

from tether._dirs import data_dir
from tether._harness import Harness, SessionEvent
from tether._signals import cancel_and_wait
from tether.agent import TEXT_DELTA, Agent, StreamedText
from tether.kernel import Disposable, Next, PluginEntry, WorkspaceTrust
from tether.kernel._printable import printable, printable_block
from tether.plugins._approval_from_store import run_store_url
from tether.policy._approval import APPROVAL_SERVICE, PendingApproval, register_answerer
from tether.policy._presets import PERMISSION_PRESETS_SERVICE
from tether.session import Event, Session
from tether.subagents._lifecycle import SubagentLifecycle
from tether.subagents._seams import SUBAGENT_START
from tether.surfaces.cli._approval_prompt import CHOICES, ENTER, session_mode
from tether.surfaces.cli._common import StoreOption, error_line, run, store_url
from tether.surfaces.cli._grant_choice import ESCAPE, SCOPE_DIGITS
from tether.surfaces.cli._hook_warnings import warn_unused_hooks
from tether.surfaces.cli._model_choice import ModelChoice, model_for_run, record_model_choice
from tether.surfaces.cli._run import (
    AppendSystemPromptOption,
    ApprovalOption,
    ApproverOption,
    ContinueOption,
    MaxStepsOption,
    MaxTurnsOption,
    ModelOption,
    ModelTimeoutOption,
    NoStreamOption,
    PermissionOption,
    PluginOption,
    ResumeOption,
    RunOptions,
    SandboxOption,
    ScopeFlags,
    SystemPromptFileOption,
    WorkspaceOption,
    model_timeout_value,
    plugin_entries,
    resume_choice,
    stream_flag,
    system_prompt_text,
)
from tether.surfaces.cli._summary import format_summary, summarize
from tether.surfaces.cli._trust import ask_at_start
from tether.surfaces.cli.chat._commands import CommandHost, dispatch, resume_root
from tether.surfaces.cli.chat._prompts import ApprovalPrompt
from tether.surfaces.cli.chat._render import EventRenderer, SessionDirectory
from tether.surfaces.cli.chat._replay import replay
from tether.surfaces.cli.chat._status import busy_line, child_statuses, idle_line
from tether.tools._ask_user import USER_QUESTION
from tether.tools._base import PostDecision, ToolCall, ToolResult
from tether.tools._seams import POST_EXECUTE

PROMPT: Final = "› "
DOUBLE_INTERRUPT_SECONDS: Final = 2.0
LIVE_LINES: Final = 3
HISTORY_FILE: Final = "chat_history"
CATCH_UP_SECONDS: Final = 0.5
"""How long a question waits for the transcript to show what was appended before it."""


class TerminalWriter(io.TextIOBase):
    """A text stream for rich that prints above a running prompt_toolkit application.

    Whole lines only: a partial line would be overwritten by the application's next redraw.
    While an application runs, each batch of lines goes through ``run_in_terminal`` (hide
    the application, write, redraw it); otherwise it is written straight away.
    """

    def __init__(self, output: Output) -> None:
        super().__init__()
        self._output = output
        self._partial = ""
        self._pending: set[asyncio.Future[None]] = set()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        data = self._partial + text
        complete, newline, self._partial = data.rpartition("\n")
        if newline:
            self._emit(complete + newline)
        return len(text)

    def _emit(self, text: str) -> None:
        def write() -> None:
            self._output.write_raw(text)
            self._output.flush()

        app = get_app_or_none()
        if app is None or not app.is_running:
            write()
            return
        future = asyncio.ensure_future(run_in_terminal(write, in_executor=False))
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)

    async def drain(self) -> None:
        """Wait until every line handed to a running application is on the screen."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)


def history_path(env: Mapping[str, str] | None = None) -> Path:
    """``chat_history`` in :func:`tether._dirs.data_dir`; the directory is created."""
    directory = data_dir(env)
    directory.mkdir(parents=True, exist_ok=True)
    return directory / HISTORY_FILE


class ConsoleLogHandler(logging.Handler):
    """Warnings from the harness (a timed-out approval, a failed listener) printed through the
    console, above the prompt, instead of raw on stderr across the screen."""

    def __init__(self, console: Console) -> None:
        super().__init__(logging.WARNING)
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = self.format(record)
            # A warning may quote a tool's or a model's text: shown escaped, like all such text.
            shown = printable_block(message)
            self.console.print(Text(f"{record.levelname.lower()}: {shown}", style="red"))
        except Exception:
            self.handleError(record)


class ChatApp:
    """The interactive loop over one opened :class:`Harness`.

    ``pt_input``/``pt_output`` default to the terminal; tests pass a pipe input and a
    ``DummyOutput`` with a ``console`` writing to a buffer.
    """

    def __init__(
        self,
        harness: Harness,
        *,
        console: Console,
        pt_input: Input | None = None,
        pt_output: Output | None = None,
        history: History | None = None,
        answer_approvals: bool = True,
        writer: TerminalWriter | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.harness = harness
        self.console = console
        self._input = pt_input
        self._output = pt_output
        self._writer = writer
        self._clock = clock
        self._answer_approvals = answer_approvals
        self.directory = SessionDirectory()
        answered_here: set[str] = set()
        self.renderer = EventRenderer(console, self.directory, answered_here)
        self.approvals = ApprovalPrompt(
            console,
            self.directory,
            accepting=lambda: self._in_turn,
            changed=self._invalidate,
            catch_up=self._catch_up,
            mode_of=lambda request: session_mode(harness.ctx, request),
            store=run_store_url(harness.ctx),
            answered_here=answered_here,
        )
        self._session: PromptSession[str] = PromptSession(
            history=history if history is not None else InMemoryHistory(),
            input=pt_input,
            output=pt_output,
        )
        self._idle_keys = self._idle_bindings()
        self.quitting = False
        self._stop = asyncio.Event()
        self._in_turn = False
        self._turn_started = 0.0
        self._last_interrupt: float | None = None
        self._busy: Application[None] | None = None
        self._registrations: list[Callable[[], None]] = []
        self._last_appended: tuple[str, int] | None = None
        self._rendered: dict[str, int] = {}

    # -- state ----------------------------------------------------------------------------------
    @property
    def root(self) -> Agent:
        root = self.harness.root
        assert root is not None, "the chat's root agent is created by run()"
        return root

    def switch_root(self, agent: Agent) -> None:
        self.harness.root = agent
        self.directory.root_id = agent.id

    def request_quit(self) -> None:
        """Leave after the current step: stop waiting for the turn and close the prompt."""
        self.quitting = True
        self._stop.set()
        self.approvals.cancel_open()
        app = self._session.app
        if app.is_running:
            app.exit(exception=EOFError())

    def interrupt(self) -> None:
        """Ctrl-C: cancel the running turn; a second one within two seconds quits."""
        if not self._in_turn:
            self.request_quit()
            return
        now = self._clock()
        if self._last_interrupt is not None and now - self._last_interrupt <= (
            DOUBLE_INTERRUPT_SECONDS
        ):
            self.console.print(Text("quitting", style="yellow"))
            self.root.cancel("user")
            self.request_quit()
            return
        self._last_interrupt = now
        self.root.cancel("user")
        self.approvals.cancel_open()
        self.console.print(
            Text("cancelling the turn · press Ctrl-C again within 2s to quit", style="yellow")
        )

    # -- lifetime -------------------------------------------------------------------------------
    async def run(self, *, resume: str | None = None, choice: ModelChoice | None = None) -> None:
        """Open (or resume) the root session, then read and run lines until the user quits;
        a new root records ``choice``, the model the user named (``_model_choice.py``)."""
        self._attach()
        try:
            if resume is not None:
                self.switch_root(await resume_root(self.harness, resume))
            elif self.harness.root is None:
                self.switch_root(self.harness.agent_for(self.harness.new_root_session()))
                record_model_choice(self.root.session, choice or ModelChoice())
            else:
                self.switch_root(self.harness.root)
            await self.harness.store.flush(self.root.session)
            self._banner(resumed=resume is not None)
            host = CommandHost(
                self.harness, self.console, lambda: self.root, self.switch_root, self.request_quit
            )
            while not self.quitting:
                line = await self._read_line()
                if line is None:
                    break
                line = line.strip()
                if not line:
                    continue
                if line.startswith("/"):
                    await dispatch(host, line)
                    continue
                await self._turn(line)
            self._farewell()
        finally:
            self._detach()

    def _attach(self) -> None:
        ctx = self.harness.ctx
        self._registrations.append(self.harness.store.on_event(self._observe))
        handles: list[Disposable] = [
            ctx.on(TEXT_DELTA, self._on_delta),
            ctx.on(POST_EXECUTE, self._on_post_execute),
            ctx.on(SUBAGENT_START, self._on_subagent_start),
        ]
        if self._answer_approvals:
            handles.append(register_answerer(ctx, self.approvals.answer))
        handles.append(ctx.on(USER_QUESTION, self.approvals.question))
        self._registrations += [handle.dispose for handle in handles]

    def _detach(self) -> None:
        while self._registrations:
            self._registrations.pop()()

    def _observe(self, session: Session, event: Event) -> None:
        self.directory.observe(session, event)
        self._last_appended = (session.id, event.seq)

    async def _catch_up(self) -> None:
        """Wait (briefly) until every event appended so far has been rendered."""
        target = self._last_appended
        if target is None or not self._in_turn:
            return
        session_id, seq = target
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CATCH_UP_SECONDS
        while self._rendered.get(session_id, -1) < seq and loop.time() < deadline:
            await asyncio.sleep(0.005)

    def _on_delta(self, payload: StreamedText) -> None:
        agent, text = payload
        self.renderer.on_delta(agent.id, text)
        self._invalidate()

    async def _on_post_execute(
        self, payload: tuple[ToolCall, ToolResult], next_: Next[PostDecision]
    ) -> PostDecision:
        call, result = payload
        agent = call.agent
        if agent is not None and call.name == "edit":
            self.renderer.capture_diff(agent.session.id, call.call_id, result.details)
        return await next_()

    def _on_subagent_start(self, lifecycle: SubagentLifecycle) -> None:
        self.directory.learn_label(lifecycle.child_id, lifecycle.label)

    def _banner(self, *, resumed: bool) -> None:
        root = self.root
        verb = "resumed" if resumed else "new"
        self.console.print(
            Text.assemble(("tether chat", "bold"), f" · {verb} session {root.id}", style="")
        )
        self.console.print(
            Text(
                f"workspace {self.harness.workspace} · preset {self._preset() or 'custom'}",
                style="dim",
            )
        )
        if resumed:
            for line in replay(root.session.events):
                self.console.print(line)
        self.console.print(
            Text("Type a request; /help lists the commands; Ctrl-D quits.", style="dim")
        )

    def _farewell(self) -> None:
        root_id = self.root.id
        self.console.print(
            Text(
                f"session {root_id} is stored; continue with: tether chat --resume {root_id}",
                style="dim",
            )
        )

    def _preset(self) -> str | None:
        service = self.harness.ctx.get(PERMISSION_PRESETS_SERVICE)
        if service is None or self.harness.root is None:
            return None
        try:
            return str(service.current(self.harness.root.session))
        except Exception:  # a status line must never break the prompt
            return None

    # -- the prompt -----------------------------------------------------------------------------
    def _idle_bindings(self) -> KeyBindings:
        keys = KeyBindings()
        typed = Condition(lambda: bool(get_app().current_buffer.text))

        @keys.add("c-c", filter=typed)
        def _clear(event: KeyPressEvent) -> None:
            event.current_buffer.reset()

        return keys

    async def _read_line(self) -> str | None:
        try:
            return await self._session.prompt_async(
                PROMPT,
                bottom_toolbar=self._toolbar,
                key_bindings=self._idle_keys,
                handle_sigint=False,
            )
        except (EOFError, KeyboardInterrupt):
            return None

    def _toolbar(self) -> str:
        rows = child_statuses(self.harness.agents, self._pending(), self.directory, {})
        return idle_line(self.root.id, self._preset(), rows)

    def _pending(self) -> list[PendingApproval]:
        approval = self.harness.ctx.get(APPROVAL_SERVICE)
        return list(approval.pending()) if approval is not None else []

    # -- a turn ---------------------------------------------------------------------------------
    async def _turn(self, line: str) -> None:
        root = self.root
        events: list[SessionEvent] = []
        self._turn_started = self._clock()
        self._last_interrupt = None
        self._in_turn = True
        busy = self._busy_app()
        self._busy = busy
        busy_task = asyncio.ensure_future(
            busy.run_async(handle_sigint=False, set_exception_handler=False)
        )
        stop = asyncio.ensure_future(self._stop.wait())
        consumer = asyncio.ensure_future(self._consume(line, events))
        try:
            while not consumer.done():
                done, _ = await asyncio.wait(
                    {consumer, stop, busy_task}, return_when=asyncio.FIRST_COMPLETED
                )
                if stop in done:
                    break
                if busy_task in done and not consumer.done():
                    # The keyboard is gone (end of input, or its handler failed): nobody can
                    # answer a question or cancel, so stop here rather than run unattended.
                    failure = None if busy_task.cancelled() else busy_task.exception()
                    why = (
                        "input closed"
                        if failure is None or isinstance(failure, EOFError)
                        else f"the keyboard handler failed ({failure!r})"
                    )
                    self.console.print(Text(f"{why}; stopping the turn", style="yellow"))
                    root.cancel("user")
                    self.request_quit()
                    break
        finally:
            if not consumer.done():
                consumer.cancel()
            await asyncio.gather(consumer, return_exceptions=True)
            await cancel_and_wait(stop)
            self._in_turn = False
            await self._end_busy(busy, busy_task)
        failure = None if consumer.cancelled() else consumer.exception()
        if failure is not None:
            raise failure
        if root.turn_limit_reached is not None:
            self.console.print(Text(f"■ {root.turn_limit_reached}", style="yellow"))
        summary = summarize(events, root_id=root.id, elapsed=self._clock() - self._turn_started)
        self.console.print(Text("── " + format_summary(summary), style="dim"))

    async def _consume(self, line: str, events: list[SessionEvent]) -> None:
        # The transcript is a view, not a record: it shows each event as it happens, and the
        # log (``--json``, ``sessions show``) is what a crash leaves (docs/reliability.md).
        stream = self.harness.stream(line, feed="appended")
        try:
            async for item in stream:
                events.append(item)
                self.renderer.render(item)
                self._rendered[item.session_id] = item.event.seq
                self._invalidate()
        finally:
            close = getattr(stream, "aclose", None)  # an async generator: stop it now
            if close is not None:
                await close()

    async def _end_busy(self, busy: Application[None], task: asyncio.Future[None]) -> None:
        if self._writer is not None:
            await self._writer.drain()
        if not task.done():
            if busy.is_running:
                busy.exit()
            else:
                task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        self._busy = None

    def _busy_app(self) -> Application[None]:
        keys = KeyBindings()
        asking = Condition(lambda: self.approvals.current is not None)
        typing = Condition(lambda: self.approvals.current_text is not None)
        answer = Buffer(multiline=False)

        @keys.add("c-c")
        def _interrupt(_event: KeyPressEvent) -> None:
            answer.reset()
            self.interrupt()

        def typed(key: str) -> Callable[[KeyPressEvent], None]:
            def press(_event: KeyPressEvent) -> None:
                self.approvals.key(key)

            return press

        # The keys an approval question reads (_grant_choice.AnswerKeys says what each does).
        for choice in CHOICES:
            for key in (choice.key, choice.key.upper()):
                keys.add(key, filter=asking)(typed(key))
        for digit in SCOPE_DIGITS:
            keys.add(digit, filter=asking)(typed(digit))
        keys.add("enter", filter=asking)(typed(ENTER[0]))
        keys.add("escape", filter=asking)(typed(ESCAPE))

        @keys.add("enter", filter=typing & ~asking)
        def _submit(_event: KeyPressEvent) -> None:
            text = answer.text
            answer.reset()
            self.approvals.submit(text)

        @keys.add(Keys.Any, filter=~typing)
        def _ignore(_event: KeyPressEvent) -> None:
            """Typing while the agent works goes nowhere (and can never answer a question
            shown later)."""

        answer_window = Window(
            BufferControl(answer, input_processors=[BeforeInput("answer› ")]),
            height=1,
            dont_extend_height=True,
        )
        layout = Layout(
            HSplit(
                [
                    Window(FormattedTextControl(self._busy_text), dont_extend_height=True),
                    ConditionalContainer(answer_window, filter=typing),
                ]
            ),
            focused_element=answer_window,
        )
        return Application(
            layout=layout,
            key_bindings=keys,
            input=self._input,
            output=self._output,
            refresh_interval=0.1,
            erase_when_done=True,
        )

    def _busy_text(self) -> StyleAndTextTuples:
        parts: StyleAndTextTuples = []
        for session_id, text in list(self.renderer.live.items())[-LIVE_LINES:]:
            last = text.rstrip("\n").rsplit("\n", 1)[-1]
            if not last.strip():
                continue
            if session_id != self.directory.root_id:
                parts.append(("fg:ansicyan", f"[{self.directory.label(session_id)}] "))
            parts.append(("", printable(last) + "\n"))
        question = self.approvals.current
        if question is not None:
            parts.append(
                (
                    "reverse bold",
                    f" approval for {printable(question.request.tool_name)}: "
                    f"{question.keys.prompt()} ",
                )
            )
            parts.append(("", "\n"))
        if self.approvals.current_text is not None:
            parts.append(("reverse bold", " the agent asks: type the answer, Enter sends "))
            parts.append(("", "\n"))
        root_tool = self.renderer.running.get(self.directory.root_id or "")
        rows = child_statuses(
            self.harness.agents, self._pending(), self.directory, self.renderer.running
        )
        line = busy_line(
            self._clock() - self._turn_started,
            root_tool[1] if root_tool is not None else None,
            rows,
            self.approvals.waiting,
        )
        parts.append(("fg:ansibrightblack", line))
        return parts

    def _invalidate(self) -> None:
        if self._busy is not None and self._busy.is_running:
            self._busy.invalidate()


# -- the command ----------------------------------------------------------------------------
NoHistoryOption = Annotated[
    bool, typer.Option("--no-history", help="Do not read or write the prompt history file.")
]


def chat_command(
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
    no_history: NoHistoryOption = False,
    no_stream: NoStreamOption = False,
    model_timeout: ModelTimeoutOption = None,
    system_prompt_file: SystemPromptFileOption = None,
    append_system_prompt: AppendSystemPromptOption = None,
    max_steps: MaxStepsOption = None,
    max_turns: MaxTurnsOption = None,
) -> None:
    """Chat with an agent at the terminal, answering its approval prompts inline."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        error_line("chat: needs a terminal on stdin and stdout (use `tether run` for scripts)")
        raise typer.Exit(2)
    resume = resume_choice(resume, continue_last)
    scope = ScopeFlags(sandbox, approval, permission).check("chat", resume)
    plugins = plugin_entries(plugin, approver)
    options = RunOptions(
        system_prompt_text(system_prompt_file),
        append_system_prompt,
        max_steps,
        max_turns,
        stream_flag(no_stream),
        model_timeout_value("chat", model_timeout),
    )
    trust = ask_at_start(workspace, plugins, store_url(store))
    warn_unused_hooks(workspace, plugins, store_url(store), trust)
    history: History = InMemoryHistory() if no_history else FileHistory(str(history_path()))
    run(
        _chat(
            model,
            workspace,
            store_url(store),
            scope,
            plugins,
            resume,
            history,
            answer_approvals=not approver,
            workspace_trust=trust,
            options=options,
        )
    )


async def _chat(
    model: str | None,
    workspace: str,
    store: str,
    scope: ScopeFlags,
    plugins: list[PluginEntry],
    resume: str | None,
    history: History,
    *,
    answer_approvals: bool,
    workspace_trust: WorkspaceTrust,
    options: RunOptions,
) -> None:
    chosen, resume, used = await model_for_run(
        store, resume, workspace, model, options.stream, options.model_timeout
    )
    model = used.model
    options = options._replace(stream=used.stream, model_timeout=used.model_timeout)
    output = get_app_session().output
    writer = TerminalWriter(output)
    console = Console(file=cast(IO[str], writer), force_terminal=True, highlight=False, emoji=False)
    async with Harness.open(
        workspace=workspace,
        model=model,
        store=store,
        plugins=plugins,
        workspace_trust=workspace_trust,
        **scope._asdict(),
        **options._asdict(),
    ) as harness:
        app = ChatApp(
            harness,
            console=console,
            history=history,
            answer_approvals=answer_approvals,
            writer=writer,
        )
        loop = asyncio.get_running_loop()
        # Ctrl-C reaches us as a key while a prompt_toolkit application runs; between them
        # the terminal is cooked and it arrives as SIGINT: same meaning either way.
        loop.add_signal_handler(signal.SIGINT, app.interrupt)
        logs = ConsoleLogHandler(console)
        logging.getLogger().addHandler(logs)
        try:
            await app.run(resume=resume, choice=chosen)
        finally:
            logging.getLogger().removeHandler(logs)
            loop.remove_signal_handler(signal.SIGINT)
        await writer.drain()


__all__ = ["ChatApp", "ConsoleLogHandler", "TerminalWriter", "chat_command", "history_path"]
