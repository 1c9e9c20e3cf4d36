"""The ``tether`` command: a thin registry of command groups.

Each group lives in its own module and is registered here with one line, so adding a command
never touches another's code.
"""

from __future__ import annotations

from typing import Annotated

import typer

from tether import __version__
from tether.surfaces.cli import approvals, chat, demo, doctor, run, sessions

app = typer.Typer(
    name="tether",
    help="An agent harness whose subagents act only within the scope fixed at delegation.",
    no_args_is_help=True,
    add_completion=False,
    # Locals in a traceback can hold prompts, payloads or credentials.
    pretty_exceptions_show_locals=False,
)

app.add_typer(sessions.app, name="sessions")
app.add_typer(approvals.app, name="approvals")
app.command("run")(run.run_command)
app.command("chat")(chat.chat_command)
app.command("demo")(demo.demo_command)
app.command("doctor")(doctor.doctor_command)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"tether {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    """tether: durable, permission-scoped agent sessions."""


def main() -> None:
    """Console-script entry point (``tether = tether.surfaces.cli.app:main``)."""
    app()
