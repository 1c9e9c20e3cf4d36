"""Drive ``tether chat`` in-process: prompt_toolkit pipe input, a rich console on a buffer.

The chat runs as a task on the test's event loop over a real harness (scripted model, SQLite
store in ``tmp_path``). The test types through the pipe and waits for text to appear in the
transcript; nothing sleeps for a fixed time.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from typing import Any

from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from script_support import write_script
from tether._harness import Harness
from tether.surfaces.cli.chat._app import ChatApp

WAIT_SECONDS = 20.0


@dataclass
class Chat:
    app: ChatApp
    harness: Harness
    pipe: PipeInput
    buffer: StringIO
    task: asyncio.Task[None]
    workspace: Path
    mark: int = 0

    @property
    def transcript(self) -> str:
        return self.buffer.getvalue()

    def type(self, text: str) -> None:
        self.pipe.send_text(text)

    def since_mark(self) -> str:
        return self.transcript[self.mark :]

    async def wait_for(self, needle: str, *, timeout: float = WAIT_SECONDS) -> str:
        """Wait until ``needle`` appears after the mark; return the text from the mark and move
        the mark past the needle."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            text = self.transcript
            found = text.find(needle, self.mark)
            if found >= 0:
                shown = text[self.mark : found + len(needle)]
                self.mark = found + len(needle)
                return shown
            if self.task.done():
                self.task.result()  # surface the chat's own failure
                raise AssertionError(
                    f"the chat ended before {needle!r} appeared:\n{text[self.mark :]}"
                )
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"never saw {needle!r}; after the mark:\n{text[self.mark :]}")
            await asyncio.sleep(0.01)

    async def turn_end(self) -> str:
        """Wait for the end of a turn: its whole summary line (``── …``)."""
        shown = await self.wait_for("── ")
        return shown + await self.wait_for("\n")

    async def turn(self, line: str) -> str:
        """Type a prompt and wait for the turn's summary line."""
        self.type(line + "\r")
        return await self.turn_end()

    async def command(self, line: str, until: str) -> str:
        self.type(line + "\r")
        return await self.wait_for(until)

    async def quit(self) -> None:
        self.type("\x04")  # Ctrl-D at an empty prompt
        await asyncio.wait_for(self.task, WAIT_SECONDS)


def root_steps(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"match": {"depth": 0}, "steps": list(steps)}


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


@asynccontextmanager
async def open_chat(
    tmp_path: Path,
    agents: Sequence[dict[str, Any]],
    *,
    plugins: Sequence[str] = ("ask_tools",),
    sandbox: str | None = None,
    approval: str | None = None,
    resume: str | None = None,
    setup: Any = None,
    clock: Any = None,
    max_turns: int | None = None,
) -> AsyncIterator[Chat]:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    script = write_script(tmp_path / "script.json", agents)
    buffer = StringIO()
    console = Console(
        file=buffer, width=1000, color_system=None, highlight=False, force_terminal=False
    )
    with create_pipe_input() as pipe:
        async with Harness.open(
            workspace=workspace,
            model=f"scripted:{script}",
            store=f"sqlite:///{tmp_path / 'tether.db'}",
            sandbox=sandbox,
            approval=approval,
            plugins=list(plugins),
            max_turns=max_turns,
        ) as harness:
            if setup is not None:
                setup(harness)
            app = ChatApp(
                harness,
                console=console,
                pt_input=pipe,
                pt_output=DummyOutput(),
                **({"clock": clock} if clock is not None else {}),
            )
            task = asyncio.ensure_future(app.run(resume=resume))
            chat = Chat(app, harness, pipe, buffer, task, workspace)
            try:
                await chat.wait_for("Ctrl-D quits.\n")
                yield chat
            finally:
                if not task.done():
                    task.cancel()
                await asyncio.gather(task, return_exceptions=True)


def events_of(harness: Harness, session_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The live session's events as ``(type, data)`` pairs."""
    from tether.session._json import thaw

    session = harness.store.get(session_id)
    assert session is not None
    return [(e.type, thaw(e.data)) for e in session.events]


async def stored_events(harness: Harness, session_id: str) -> list[tuple[str, dict[str, Any]]]:
    from tether.session._json import thaw

    persistence = harness.store.persistence
    assert persistence is not None
    session = harness.store.get(session_id)
    if session is not None:
        await harness.store.flush(session)
    stored = await persistence.inspect(session_id)
    return [(e.type, thaw(e.data)) for e in stored.events]
