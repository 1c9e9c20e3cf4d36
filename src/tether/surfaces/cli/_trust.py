"""``tether trust``: review a workspace's configuration and trust it, list trust, revoke it.

``tether trust [--workspace DIR]`` prints every configuration file ``tether run`` would read
from the workspace (its state against the trust record, and its whole content with control
characters escaped), then records exactly that content as trusted. The review text is shared
with ``tether chat``, which shows it before asking.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from typing import Annotated

import typer

from tether._harness import Harness
from tether.errors import TetherError
from tether.kernel import PluginEntry, WorkspaceTrust
from tether.kernel._printable import printable
from tether.kernel._trust_store import TrustRecord, TrustStore, TrustStoreError
from tether.kernel._workspace_files import ABSENT, locate, read_file
from tether.kernel._workspace_trust import (
    FileStatus,
    InspectedWorkspace,
    record_trust,
    trust_command_line,
)
from tether.surfaces.cli._common import EXIT_PROBLEMS, error_line, fail, iso_time, table, write_text

STATUS_NOTES: dict[FileStatus, str] = {
    FileStatus.NEW: "new",
    FileStatus.CHANGED: "changed since you trusted this workspace",
    FileStatus.REMOVED: "removed since you trusted this workspace",
    FileStatus.TRUSTED: "trusted",
    FileStatus.ABSENT: "absent (a file created here later needs trust again)",
}


def trust_command(
    workspace: Annotated[
        str, typer.Option("--workspace", metavar="DIR", help="Workspace root (default: cwd).")
    ] = ".",
    list_records: Annotated[
        bool, typer.Option("--list", help="List the trusted workspaces.")
    ] = False,
    revoke: Annotated[
        bool, typer.Option("--revoke", help="Forget the trust recorded for the workspace.")
    ] = False,
) -> None:
    """Review a workspace's configuration (tether.toml and the files it lists) and trust it."""
    if list_records and (revoke or workspace != "."):
        error_line("trust: --list takes no --workspace or --revoke")
        raise typer.Exit(2)
    store = TrustStore.for_user()
    try:
        if list_records:
            _list(store)
        elif revoke:
            _revoke(store, os.path.realpath(workspace))
        else:
            _trust(store, workspace)
    except TetherError as err:
        fail(err)


def _trust(store: TrustStore, workspace: str) -> None:
    inspected = Harness.inspect_workspace(workspace=workspace)
    write_text(review(inspected))
    root = printable(inspected.root)
    if not inspected.present():
        if store.remove(inspected.root):
            typer.echo(f"no configuration files remain in {root}; its trust record was removed")
        else:
            typer.echo(f"nothing to trust in {root}: it has no configuration files")
        return
    if inspected.distrust is None and not inspected.needing_trust():
        typer.echo(f"{root} is already trusted with this content; nothing changed")
        return
    try:
        record = record_trust(inspected, store)
    except TrustStoreError:
        raise  # the records, not the file, are the problem
    except TetherError as err:
        error_line(f"{err.code}: {err} (nothing was recorded: fix it, then run tether trust again)")
        raise typer.Exit(EXIT_PROBLEMS) from None
    count = len([r for r in inspected.reports if r.snapshot.state != ABSENT])
    typer.echo(
        f"trusted {root}: {count} file{'s' if count != 1 else ''} ({record.digest}); "
        f"revoke with: tether trust --revoke --workspace {printable(shlex.quote(inspected.root))}"
    )


def ask_at_start(workspace: str, plugins: Sequence[PluginEntry], store: str) -> WorkspaceTrust:
    """For an interactive surface: when the workspace's configuration is new or changed, show
    it and ask. Yes records the trust shown; no composes without the configuration."""
    try:
        inspected = Harness.inspect_workspace(workspace=workspace, plugins=plugins, store=store)
    except TetherError as err:
        fail(err)
    untrusted = inspected.untrusted()
    if not untrusted:
        return WorkspaceTrust.RECORDED
    write_text(review(inspected))
    root = printable(inspected.root)
    if typer.confirm("Trust this configuration for this workspace?", default=False):
        try:
            record_trust(inspected, TrustStore.for_user())
        except TetherError as err:
            fail(err)
        typer.echo(f"trusted {root}")
        return WorkspaceTrust.RECORDED
    listed = ", ".join(printable(r.key) for r in untrusted)
    typer.echo(
        f"running without this workspace's configuration ({listed} not used); to use it: "
        f"{trust_command_line(inspected.root)}"
    )
    return WorkspaceTrust.IGNORE


def _revoke(store: TrustStore, root: str) -> None:
    if store.remove(root):
        typer.echo(f"revoked trust for {printable(root)}")
    else:
        typer.echo(f"no trust was recorded for {printable(root)}")


def _list(store: TrustStore) -> None:
    rows: list[list[str]] = []
    for record in store.records():
        if isinstance(record, TrustStoreError):
            typer.echo(f"tether: {record.code}: {record}", err=True)
            continue
        rows.append(
            [
                printable(record.workspace),
                iso_time(record.trusted_at),
                str(sum(1 for state in record.files.values() if state != ABSENT)),
                _now(record),
            ]
        )
    if not rows:
        typer.echo("no trusted workspaces")
        return
    write_text(table(["WORKSPACE", "TRUSTED", "FILES", "NOW"], rows))


def _now(record: TrustRecord) -> str:
    """Whether the recorded files still have the trusted content."""
    if not os.path.isdir(record.workspace):
        return "missing"
    for key, state in record.files.items():
        _, path, _ = locate(record.workspace, key)
        if read_file(key, path).state != state:
            return "changed"
    return "trusted"


def review(inspected: InspectedWorkspace) -> str:
    """Every configuration file of the workspace: state, then its content, escaped."""
    lines = [f"workspace {printable(inspected.root)}"]
    if inspected.distrust is not None and inspected.trust is WorkspaceTrust.RECORDED:
        lines.append(f"note: {printable(inspected.distrust)}")
    for report in inspected.reports:
        snapshot = report.snapshot
        where = "" if report.named_by_workspace else " (named by your own configuration)"
        if report.optional:
            where = " (for its permissions rules, which apply only once trusted)"
        if snapshot.error is not None:
            lines.append(
                f"{printable(report.key)}{where}: {report.status}, unreadable: "
                f"{printable(snapshot.error)}"
            )
            continue
        if snapshot.content is None:
            lines.append(f"{printable(report.key)}{where}: {STATUS_NOTES[report.status]}")
            continue
        size = len(snapshot.content)
        lines.append(
            f"{printable(report.key)}{where}: {STATUS_NOTES[report.status]} "
            f"({size} byte{'s' if size != 1 else ''}, {snapshot.state})"
        )
        text = snapshot.content.decode("utf-8", errors="backslashreplace")
        # Split on "\n" only: every other line break is escaped, so it cannot hide a line.
        body = text[:-1] if text.endswith("\n") else text
        lines += [f"  | {printable(line)}" for line in body.split("\n")]
    if inspected.problem is not None:
        lines.append(f"problem: {inspected.problem.code}: {printable(str(inspected.problem))}")
    return "\n".join(lines) + "\n"


__all__ = ["ask_at_start", "review", "trust_command"]
