"""``tether doctor``: what this installation would use, and whether it works.

Each line is a check with ``ok`` or ``problem`` and the reason. Exit 1 when a check that a run
needs (the store) fails; a missing model configuration is reported but is not fatal, because
``--model`` can still be given per run.
"""

from __future__ import annotations

import os

import typer

from tether import __version__
from tether.errors import TetherError
from tether.kernel import available_plugins
from tether.model import parse_model_spec
from tether.sandbox import describe_backends
from tether.surfaces.cli.common import StoreOption, opened_store, run, store_url

KEY_FOR = {"openai": "OPENAI_API_KEY", "deepseek": "DEEPSEEK_API_KEY"}


def doctor_command(store: StoreOption = None) -> None:
    """Show the model configuration, the store and the available plugins."""
    typer.echo(f"tether {__version__}")
    fatal = False
    typer.echo(_model_line(os.environ))
    url = store_url(store)
    try:
        count = run(_count_sessions(store))
        typer.echo(f"store: ok: {url} ({count} sessions)")
    except typer.Exit:
        fatal = True
    for report in describe_backends():
        typer.echo(f"sandbox {report.name}: {report.status}: {report.reason}")
        for aspect, how in report.enforces:  # what it confines (docs/sandbox.md)
            typer.echo(f"  {aspect}: {how}")
    plugins = available_plugins()
    typer.echo(f"plugins: {', '.join(sorted(plugins)) or 'none'}")
    if fatal:
        raise typer.Exit(1)


def _model_line(env: os._Environ[str] | dict[str, str]) -> str:
    spec = env.get("TETHER_MODEL")
    if not spec:
        return "model: problem: TETHER_MODEL is not set (pass --model scripted:PATH, openai:MODEL or deepseek:MODEL)"
    try:
        parsed = parse_model_spec(spec)
    except TetherError as err:
        return f"model: problem: {err}"
    key = KEY_FOR.get(parsed.kind)
    if key is not None and not env.get(key):
        return f"model: problem: {spec} needs {key}"
    return f"model: ok: {spec}"


async def _count_sessions(store: str | None) -> int:
    async with opened_store(store) as persistence:
        return len(await persistence.list())
