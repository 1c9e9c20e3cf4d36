"""Pieces every command group shares: the ``--store``/``--json`` options, opening the backend,
and turning a :class:`~tether.errors.TetherError` into a one-line error and a non-zero exit.

A user-facing failure is never a traceback: it prints ``tether: <code>: <message>`` on stderr
and exits 1, so scripts can match on the stable code.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Annotated, NoReturn, TypeVar

import typer

from tether.errors import TetherError
from tether.session.persistence import Persistence, open_persistence
from tether.session.persistence._factory import MEMORY_URL, store_location
from tether.surfaces.cli._basics import error_line as error_line
from tether.surfaces.cli._basics import store_url as store_url
from tether.surfaces.cli._basics import write_text as write_text

T = TypeVar("T")

EXIT_PROBLEMS = 1
"""Exit status for a reported error or for problems a command found (fsck)."""

StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        metavar="URL",
        help=(
            "Session store: sqlite:////ABS/PATH.db, jsonl:///ABS/DIR or memory:// "
            "(this process only) (default: $TETHER_STORE, else the user data dir)."
        ),
        show_default=False,
    ),
]

JsonOption = Annotated[
    bool,
    typer.Option("--json", help="Print machine-readable JSON instead of text."),
]


class StoreNotFoundError(TetherError):
    """A command that only reads or changes existing sessions was pointed at no store."""

    code = "STORE_NOT_FOUND"


@asynccontextmanager
async def opened_store(
    store: str | None, *, existing: bool = False, in_memory: bool = False
) -> AsyncIterator[Persistence]:
    """Open the backend for the duration of one command and always close it.

    ``existing``: the command only reads or changes sessions already stored, so a store that
    does not exist is :class:`StoreNotFoundError` rather than a new, empty one left behind (a
    mistyped ``--store`` path must not create a file). A command reads and writes the sessions
    of runs in other processes, which ``memory://`` never holds: it is refused
    (``STORE_IN_MEMORY``) unless ``in_memory`` says the command only describes the store.
    """
    url = store_url(store)
    if not (in_memory and url == MEMORY_URL):
        _, path = store_location(url)  # the refusal of memory://
        if existing and not path.exists():
            raise StoreNotFoundError(f"no session store at {path} (nothing was stored there)")
    persistence = open_persistence(url)
    try:
        yield persistence
    finally:
        await persistence.close()


def fail(err: TetherError) -> NoReturn:
    """Print ``tether: <code>: <message>`` on stderr and exit 1."""
    error_line(f"{err.code}: {err}")
    raise typer.Exit(EXIT_PROBLEMS)


def run(coro: Coroutine[object, object, T]) -> T:
    """Run one command's coroutine; a :class:`TetherError` becomes a one-line error."""
    try:
        return asyncio.run(coro)
    except TetherError as err:
        fail(err)


def print_json(value: object) -> None:
    write_text(json.dumps(value, ensure_ascii=False, indent=2) + "\n")


def iso_time(epoch_ms: int) -> str:
    """Epoch milliseconds as ISO 8601 UTC, e.g. ``2025-01-02T03:04:05.678Z``."""
    try:
        moment = datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
    except (ValueError, OverflowError, OSError):  # a damaged header's time, out of range
        return f"{epoch_ms} ms (not a time)"
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def table(headings: list[str], rows: list[list[str]]) -> str:
    """Plain left-aligned columns (no wrapping or truncation, so output is greppable)."""
    widths = [len(h) for h in headings]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = []
    for row in [headings, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=True)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"
