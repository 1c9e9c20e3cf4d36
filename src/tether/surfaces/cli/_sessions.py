"""``tether sessions``: list, show, export, import and check stored sessions.

Every command here reads through the backend's non-mutating ``inspect``/``list``; only
``import`` (a new session) and ``fsck --repair`` (the backend's durable ``load`` repair) write.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from tether.errors import TetherError
from tether.kernel._printable import printable
from tether.policy._imported import import_narrowing
from tether.session._events import Event
from tether.session._header import SessionHeader
from tether.session._lease import Leases, SessionLiveError
from tether.session._session import wall_clock_ms
from tether.session.persistence._base import (
    ListsIds,
    Persistence,
    RepairReport,
    SessionExistsError,
    SessionNotFoundError,
    StoredSession,
)
from tether.subagents._lineage import LineageNode, lineage_tree, render_tree
from tether.subagents._narrowing import narrow_stored
from tether.surfaces.cli._archive import export_lines, parse_archive
from tether.surfaces.cli._common import (
    EXIT_PROBLEMS,
    JsonOption,
    StoreNotFoundError,
    StoreOption,
    error_line,
    fail,
    iso_time,
    opened_store,
    print_json,
    run,
    store_url,
    table,
    write_text,
)
from tether.surfaces.cli._fsck import FsckReport, Status, fsck
from tether.surfaces.cli._id_prefix import resolve_session_id
from tether.surfaces.cli._salvage import salvage
from tether.surfaces.cli._session_rows import SessionRow, prompt_cell, session_rows

app = typer.Typer(
    name="sessions",
    help="List, show, tree, narrow, export, import and check stored sessions.",
    no_args_is_help=True,
)

SessionIdArgument = Annotated[str, typer.Argument(metavar="ID", help="Session id.")]

DATA_PREVIEW = 120
"""Characters of an event's payload shown by ``show`` (``--json`` and ``export`` show all)."""


class FileAccessError(TetherError):
    """A file named on the command line could not be read or written."""

    code = "FILE_ERROR"


# -- list -------------------------------------------------------------------------------------
@app.command("list")
def list_sessions(
    workspace: Annotated[
        str | None,
        typer.Option(
            "--workspace", metavar="DIR", help="Only the sessions of this workspace directory."
        ),
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """One row per stored session, newest first: its first prompt, workspace, status and how
    many subagents it delegated to.

    A session whose header cannot be read is named on stderr (tether sessions fsck says more)
    and the others are still listed; the exit status is then 1.
    """
    rows, unreadable = run(_list(store, workspace))
    if as_json:
        print_json([row.to_dict() for row in rows])
    elif not rows:
        typer.echo("no sessions")
    else:
        cells = [
            [
                r.header.id,
                iso_time(r.header.created_at),
                str(r.header.delegation_depth),
                r.header.parent_session or "-",
                printable(r.status),
                str(r.children),
                printable(r.header.cwd or "-"),
                printable(prompt_cell(r.first_prompt)),
            ]
            for r in rows
        ]
        headings = ["ID", "CREATED", "DEPTH", "PARENT", "STATUS", "CHILDREN", "WORKSPACE"]
        write_text(table([*headings, "FIRST PROMPT"], cells))
    for session_id, err in unreadable:
        error_line(
            f"session {session_id!r} is unreadable: {err.code}: {err} (see tether sessions fsck)"
        )
    if unreadable:
        raise typer.Exit(EXIT_PROBLEMS)


async def _list(store: str | None, workspace: str | None) -> tuple[list[SessionRow], Unreadable]:
    try:
        async with opened_store(store, existing=True) as persistence:
            headers, unreadable = await _headers(persistence)
            return await session_rows(persistence, headers, workspace=workspace), unreadable
    except StoreNotFoundError:
        return [], []  # nothing stored yet: an empty list, and no store created


Unreadable = list[tuple[str, TetherError]]


async def _headers(persistence: Persistence) -> tuple[list[SessionHeader], Unreadable]:
    try:
        return await persistence.list(), []
    except TetherError:
        if not isinstance(persistence, ListsIds):
            raise
        ids = await persistence.list_ids()
    return await _one_by_one(persistence, ids)


async def _one_by_one(
    persistence: Persistence, ids: list[str]
) -> tuple[list[SessionHeader], Unreadable]:
    """The slow path once ``list`` refused an unreadable header: every session on its own, so
    one bad header does not hide the others."""
    headers: list[SessionHeader] = []
    unreadable: Unreadable = []
    for session_id in ids:
        try:
            headers.append((await persistence.inspect(session_id)).header)
        except TetherError as err:
            unreadable.append((session_id, err))
    return headers, unreadable


# -- show -------------------------------------------------------------------------------------
@app.command("show")
def show(
    session_id: SessionIdArgument, store: StoreOption = None, as_json: JsonOption = False
) -> None:
    """A session's header and events, as loading would see them (nothing is written)."""
    stored = run(_inspect(store, session_id))
    if as_json:
        print_json(
            {
                "header": stored.header.to_dict(),
                "events": [event.to_dict() for event in stored.events],
                "repair": _repair_dict(stored.repair),
            }
        )
        return
    write_text(_render_header(stored.header, len(stored.events)))
    note = _repair_note(stored.repair)
    if note:
        write_text(note)
    if stored.events:
        write_text("\n" + table(["SEQ", "TIME", "TYPE", "DATA"], _event_rows(stored.events)))


async def _inspect(store: str | None, session_id: str) -> StoredSession:
    async with opened_store(store, existing=True) as persistence:
        return await persistence.inspect(await resolve_session_id(persistence, session_id))


def _render_header(header: SessionHeader, count: int) -> str:
    fields = [
        ("session", header.id),
        ("created", iso_time(header.created_at)),
        ("cwd", header.cwd or "-"),
        ("parent", header.parent_session or "-"),
        ("origin", header.origin or "-"),
        ("depth", str(header.delegation_depth)),
        ("seed", "-" if header.seed_length is None else str(header.seed_length)),
        ("preset", header.agent_preset or "-"),
        ("events", str(count)),
    ]
    width = max(len(key) for key, _ in fields)
    return "".join(f"{key.ljust(width)}  {printable(value)}\n" for key, value in fields)


def _event_rows(events: tuple[Event, ...]) -> list[list[str]]:
    rows = []
    for event in events:
        data = json.dumps(event.to_dict()["data"], ensure_ascii=False, separators=(",", ":"))
        if len(data) > DATA_PREVIEW:
            data = data[: DATA_PREVIEW - 1] + "…"
        # JSON escapes C0 controls only: a C1 control or a bidi override would reach the
        # terminal as itself.
        rows.append([str(event.seq), iso_time(event.time), printable(event.type), printable(data)])
    return rows


def _repair_dict(report: RepairReport) -> dict[str, object]:
    return {
        "dropped_tail": report.dropped_tail,
        "synthesized": list(report.synthesized),
        "unmatched_approvals": list(report.unmatched_approvals),
    }


def _repair_note(report: RepairReport) -> str:
    if not report.changed:
        return ""
    parts = []
    if report.dropped_tail:
        parts.append(f"{report.dropped_tail} torn trailing record(s) dropped")
    if report.synthesized:
        parts.append(f"closers added: {', '.join(report.synthesized)}")
    return (
        f"note: the stored log is damaged; shown as loading would repair it ({'; '.join(parts)})."
        " Run `tether sessions fsck --repair` to store the repair.\n"
    )


# -- export -----------------------------------------------------------------------------------
@app.command("tree")
def tree(
    session_id: Annotated[str, typer.Argument(metavar="ID", help="The root of the tree.")],
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a session's delegation tree: each child's mode, approval policy, depth, status."""
    node = run(_tree(store, session_id))
    if as_json:
        print_json(node.to_dict())
    else:
        write_text("\n".join(printable(line) for line in render_tree(node)) + "\n")


async def _tree(store: str | None, session_id: str) -> LineageNode:
    async with opened_store(store, existing=True) as persistence:
        session_id = await resolve_session_id(persistence, session_id)
        return await lineage_tree(
            persistence, session_id, leases=Leases.for_store(store_url(store))
        )


@app.command("narrow")
def narrow(
    session_id: Annotated[str, typer.Argument(metavar="CHILD_ID", help="A subagent session.")],
    mode: Annotated[str, typer.Argument(metavar="MODE", help="read-only or workspace-write.")],
    store: StoreOption = None,
) -> None:
    """Narrow a subagent's sandbox mode (recorded as sandbox/mode {source: parent})."""
    session_id, changed = run(_narrow(store, session_id, mode))
    write_text(f"{session_id}: {'narrowed to ' + mode if changed else 'already ' + mode}\n")


async def _narrow(store: str | None, session_id: str, mode: str) -> tuple[str, bool]:
    async with opened_store(store, existing=True) as persistence:
        session_id = await resolve_session_id(persistence, session_id)
        # Hold the lease while writing: a process running the session would have its next
        # append fail (SEQ_CONFLICT), and one starting to run it must wait for us.
        try:
            lease = Leases.for_store(store_url(store)).take(session_id)
        except SessionLiveError as err:
            raise SessionLiveError(
                f"{err}; narrow it there (through the harness) or once it is no longer running"
            ) from None
        try:
            return session_id, await narrow_stored(persistence, session_id, mode)
        finally:
            lease.release()


@app.command("export")
def export(
    session_id: SessionIdArgument,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            metavar="FILE",
            help="Write to FILE instead of stdout.",
            dir_okay=False,
        ),
    ] = None,
    store: StoreOption = None,
) -> None:
    """Write the session and every subagent session under it: for each, the header line, then
    one event per line (the JSONL session format)."""
    tree = run(_inspect_tree(store, session_id))
    lines = [line for stored in tree for line in export_lines(stored.header, stored.events)]
    if output is None:
        write_text("".join(lines))
        return
    try:
        _write_atomically(output, "".join(lines))
    except OSError as err:
        fail(FileAccessError(f"cannot write {output}: {err.strerror or err}"))


async def _inspect_tree(store: str | None, session_id: str) -> list[StoredSession]:
    """The session, then its delegated descendants, each after its parent (oldest first)."""
    async with opened_store(store, existing=True) as persistence:
        root = await resolve_session_id(persistence, session_id)
        headers = await persistence.list()
        children: dict[str, list[SessionHeader]] = {}
        for header in sorted(headers, key=lambda h: (h.created_at, h.id)):
            if header.parent_session is not None and header.delegation_depth > 0:
                children.setdefault(header.parent_session, []).append(header)
        order, waiting = [], [root]
        while waiting:
            current = waiting.pop(0)
            order.append(current)
            waiting = [h.id for h in children.get(current, [])] + waiting
        return [await persistence.inspect(one) for one in order]


def _write_atomically(path: Path, text: str) -> None:
    # A reader (or a later import) never sees half an export, even if the disk fills up.
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temp, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


# -- import -----------------------------------------------------------------------------------
@app.command("import")
def import_session(
    file: Annotated[str, typer.Argument(metavar="FILE", help="An export file, or - for stdin.")],
    store: StoreOption = None,
) -> None:
    """Store the sessions of an export file (a session and its subagents); the whole file is
    validated first and the root's id printed.

    Any error (the message names the line) stores nothing. An id already in the store is
    refused with SESSION_ALREADY_EXISTS, before any session is stored.
    """
    data, source = _read_input(file)
    session_id = run(_import(store, data, source))
    typer.echo(session_id)


def _read_input(file: str) -> tuple[bytes, str]:
    if file == "-":
        return sys.stdin.buffer.read(), "<stdin>"
    try:
        return Path(file).read_bytes(), file
    except OSError as err:
        fail(FileAccessError(f"cannot read {file}: {err.strerror or err}"))


async def _import(store: str | None, data: bytes, source: str) -> str:
    archives = parse_archive(data, source)
    async with opened_store(store) as persistence:
        taken = {h.id for h in await persistence.list()}
        for archive in archives:
            if archive.header.id in taken:
                raise SessionExistsError(f"session {archive.header.id!r} already exists")
        # The file is someone else's word: its grants and a wide mode end as it arrives
        # (worked out for every session first, so a log that cannot be read stores nothing).
        now = wall_clock_ms()
        logs = [[*a.events, *import_narrowing(a.header, a.events, now)] for a in archives]
        for archive, events in zip(archives, logs, strict=True):
            # create() refuses a taken id atomically (SESSION_ALREADY_EXISTS), before any event.
            await persistence.create(archive.header)
            if events:
                await persistence.append(archive.header.id, events)
    return archives[0].header.id


# -- fsck -------------------------------------------------------------------------------------
@app.command("fsck")
def fsck_command(
    session_id: Annotated[
        str | None,
        typer.Argument(metavar="ID", help="Check only this session (default: every session)."),
    ] = None,
    repair: Annotated[
        bool,
        typer.Option("--repair", help="Repair damaged sessions durably (as loading does)."),
    ] = False,
    salvage_to: Annotated[
        str | None,
        typer.Option(
            "--salvage",
            metavar="DEST",
            help="Copy every session that can still be read into the new store DEST.",
        ),
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Verify stored sessions: torn tails, unclosed turns, unmatched approvals, unreadable logs.

    Exits 0 when every session is ok (or was repaired), 1 when problems remain.
    """
    if salvage_to is not None:
        if repair or session_id is not None or as_json:
            error_line("fsck: --salvage copies every readable session; it takes no ID, --repair "
                       "or --json")  # fmt: skip
            raise typer.Exit(2)
        salvaged = run(salvage(store_url(store), salvage_to))
        write_text(salvaged.text())
        if not salvaged.ok:
            raise typer.Exit(EXIT_PROBLEMS)
        return
    report = run(_fsck(store, session_id, repair))
    if as_json:
        print_json(report.to_dict())
    else:
        text = "".join(check.describe() + "\n" for check in report.sessions)
        write_text(text + report.summary() + "\n")
    if not report.ok:
        raise typer.Exit(EXIT_PROBLEMS)


async def _fsck(store: str | None, session_id: str | None, repair: bool) -> FsckReport:
    try:
        return await _fsck_existing(store, session_id, repair)
    except StoreNotFoundError:
        if session_id is not None:
            raise
        return FsckReport(repair=repair)  # nothing stored yet: nothing to check, nothing made


async def _fsck_existing(store: str | None, session_id: str | None, repair: bool) -> FsckReport:
    async with opened_store(store, existing=True) as persistence:
        if session_id is None:
            # Enumerate ids without parsing headers where the backend can, so one unreadable
            # header is reported like any other damage instead of stopping the survey.
            ids = (
                await persistence.list_ids()
                if isinstance(persistence, ListsIds)
                else [header.id for header in await persistence.list()]
            )
        else:
            ids = [await resolve_session_id(persistence, session_id)]
        report = await fsck(
            persistence, ids, repair=repair, leases=Leases.for_store(store_url(store))
        )
    if session_id is not None:
        # A mistyped id is a usage error, not a damaged session.
        only = report.sessions[0]
        if only.status is Status.UNREADABLE and only.problems[0].code == SessionNotFoundError.code:
            raise SessionNotFoundError(only.problems[0].message)
    return report
