"""The ``tether`` command's app: a thin registry of command groups.

Each group lives in its own module and is registered here with one line, so adding a command
never touches another's code. Groups are imported only when needed: ``tether sessions list``
must not pay for importing the agent, the sandbox and the chat UI. :func:`run` registers just
the group named on the command line (all of them for ``--help`` or an unknown name); the
module attribute ``app`` is the full app. (``tether approvals answer`` for an approval that
waits does not even come here: :mod:`._app`.)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Annotated

import typer

from tether import __version__

GROUPS: dict[str, str] = {
    "sessions": "_sessions",
    "approvals": "_approvals",
    "grants": "_grants",
}
"""Sub-command groups: name → module under ``tether.surfaces.cli`` exposing ``app``."""
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("_run", "run_command"),
    "chat": ("chat._app", "chat_command"),
    "demo": ("_demo", "demo_command"),
    "doctor": ("_doctor", "doctor_command"),
    "trust": ("_trust", "trust_command"),
}
"""Single commands: name → (module, function)."""


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"tether.surfaces.cli.{name}")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"tether {__version__}")
        raise typer.Exit()


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


def build_app(only: str | None = None) -> typer.Typer:
    """The app with every command, or only ``only`` when it names one."""
    app = typer.Typer(
        name="tether",
        help="An agent harness whose subagents act only within the scope fixed at delegation.",
        no_args_is_help=True,
        add_completion=False,
        context_settings={"help_option_names": ["-h", "--help"]},
        # Plain help and errors: no <bool> metavars on flags, no markup shown literally, and
        # an error's lines kept as written (a rich panel re-wraps them).
        rich_markup_mode=None,
        # Locals in a traceback can hold prompts, payloads or credentials.
        pretty_exceptions_show_locals=False,
    )
    app.callback()(_root)
    known = only in GROUPS or only in COMMANDS
    for name, module in GROUPS.items():
        if not known or name == only:
            app.add_typer(_module(module).app, name=name)
    for name, (module, function) in COMMANDS.items():
        if not known or name == only:
            command: Callable[..., None] = getattr(_module(module), function)
            app.command(name)(command)
    return app


def __getattr__(name: str) -> typer.Typer:
    if name == "app":
        return build_app()
    raise AttributeError(name)


def run(argv: list[str]) -> None:
    """Parse ``argv`` (the command line after ``tether``) and run the command it names."""
    first = next((arg for arg in argv if not arg.startswith("-")), None)
    build_app(first)(argv)
