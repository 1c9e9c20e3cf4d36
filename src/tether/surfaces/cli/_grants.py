"""``tether grants``: the grants and permission rules in force for a workspace, and revoking a
grant.

``list`` shows, one row each: the session grants of one stored session (``--session``, by
default this workspace's newest), the user's ``allowed-always`` rules for the workspace, and the
rules of the configuration files a run there would apply (the user's ``tether.toml``, the
workspace's trusted ``tether.toml`` and ``.claude/settings*.json``), which are changed by
editing those files. ``revoke ID`` (an id or a unique prefix) ends a session grant, by
appending ``approval/grant-revoked`` to that session's log under its lease (a running session
is revoked from its own chat, ``/grants revoke``), or removes an always rule from the user's
file.
"""

from __future__ import annotations

import getpass
from dataclasses import dataclass
from typing import Annotated, Final

import typer

from tether._harness import Harness
from tether.errors import TetherError
from tether.kernel._printable import printable
from tether.policy._errors import GrantNotFoundError
from tether.policy._grants import fold_grants, revoke_stored_grant
from tether.policy._permissions import Held, PermissionRules, find_held, held_grants
from tether.policy._rule_sources import load_permission_rules
from tether.policy._rules import PermissionRule
from tether.session._lease import Leases, SessionLiveError
from tether.session.persistence._base import SessionNotFoundError
from tether.surfaces.cli._common import (
    JsonOption,
    StoreNotFoundError,
    StoreOption,
    fail,
    iso_time,
    opened_store,
    print_json,
    run,
    store_url,
    table,
    write_text,
)
from tether.surfaces.cli._id_prefix import LAST, resolve_session_id

app = typer.Typer(
    name="grants",
    help="List the grants and permission rules in force, and revoke a grant.",
    no_args_is_help=True,
)

REVOKED_BY = "tether grants revoke"
HEADINGS: Final = ["ID", "KIND", "DECISION", "RULE", "ESCALATE", "FROM", "SINCE", "BY"]

WorkspaceOption = Annotated[
    str,
    typer.Option("--workspace", metavar="DIR", help="The workspace (default: cwd)."),
]
SessionOption = Annotated[
    str,
    typer.Option(
        "--session",
        metavar="ID",
        help="Whose session grants: an id, a unique prefix, or last (the default: the "
        "workspace's newest session).",
    ),
]


@dataclass(frozen=True, slots=True)
class Row:
    """One grant or rule, as listed."""

    id: str
    kind: str
    decision: str
    rule: str
    escalate: str
    source: str
    since: str
    by: str

    def cells(self) -> list[str]:
        return [
            self.id,
            self.kind,
            self.decision,
            printable(self.rule),
            self.escalate,
            printable(self.source),
            self.since,
            printable(self.by),
        ]

    def to_dict(self) -> dict[str, str | None]:
        return {
            "id": self.id or None,
            "kind": self.kind,
            "decision": self.decision,
            "rule": self.rule,
            "escalate": self.escalate or None,
            "source": self.source,
            "since": self.since or None,
            "by": self.by or None,
        }


def held_row(grant: Held) -> Row:
    return Row(
        grant.id,
        grant.kind,
        "allow",
        grant.rule,
        grant.target_mode.value if grant.target_mode else "",
        grant.where,
        iso_time(grant.since),
        grant.by or "",
    )


def rule_row(rule: PermissionRule) -> Row:
    return Row(
        "",
        "rule",
        rule.decision,
        rule.text,
        rule.escalate.value if rule.escalate else "",
        rule.file or rule.origin.value,
        "",
        "",
    )


def configured_rules(workspace: str, store: str | None) -> PermissionRules:
    """The rules a run in ``workspace`` would apply (a workspace file only when trusted)."""
    return load_permission_rules(Harness.inspect_workspace(workspace=workspace, store=store))


@app.command("list")
def list_grants(
    workspace: WorkspaceOption = ".",
    session: SessionOption = LAST,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """The session grants of one session, the always rules for the workspace, then the
    rules of its configuration files: id, kind, decision, rule, escalation, where from, since
    when, granted by."""
    rules = _rules(workspace, store)
    grants = run(_session_grants(store, workspace, session, rules))
    rows = [held_row(g) for g in grants] + [rule_row(r) for r in rules.configured]
    if as_json:
        print_json([row.to_dict() for row in rows])
        return
    for warning in rules.warnings:
        typer.echo(f"tether: warning: {printable(warning)}", err=True)
    if rules.store_problem is not None:
        typer.echo(f"tether: warning: {printable(rules.store_problem)}", err=True)
    if not rows:
        write_text("no grants and no permission rules\n")
        return
    write_text(table(HEADINGS, [row.cells() for row in rows]))


def _rules(workspace: str, store: str | None) -> PermissionRules:
    try:
        rules = configured_rules(workspace, store)
    except TetherError as err:
        fail(err)
    rules.always()  # read now, so a problem with the user's file is said
    return rules


async def _session_grants(
    store: str | None, workspace: str, wanted: str, rules: PermissionRules
) -> list[Held]:
    """``wanted``'s session grants (none when the store or the session does not exist and
    ``wanted`` is the default), then the always rules."""
    always = held_grants(rules, None)
    try:
        async with opened_store(store, existing=True) as persistence:
            session_id = await resolve_session_id(persistence, wanted, workspace=workspace)
            stored = await persistence.inspect(session_id)
            held = [
                Held(
                    "session",
                    g.id,
                    g.scope.rule,
                    g.scope.target_mode,
                    g.time,
                    g.event.granted_by,
                    session_id,
                )
                for g in fold_grants(stored.header, stored.events)
            ]
            return held + always
    except (StoreNotFoundError, SessionNotFoundError):
        if wanted != LAST:
            raise
    return always


@app.command("revoke")
def revoke_grant(
    grant_id: Annotated[str, typer.Argument(metavar="ID", help="A grant's id or unique prefix.")],
    workspace: WorkspaceOption = ".",
    session: SessionOption = LAST,
    store: StoreOption = None,
) -> None:
    """Revoke a session grant (recorded in its session's log) or an always rule (removed
    from your rules file)."""
    rules = _rules(workspace, store)
    revoked = run(_revoke(store, workspace, session, rules, grant_id))
    where = f"session {revoked.where}" if revoked.kind == "session" else printable(revoked.where)
    write_text(
        f"revoked {revoked.kind} grant {revoked.id}: {printable(revoked.describe())} ({where})\n"
    )


async def _revoke(
    store: str | None, workspace: str, wanted: str, rules: PermissionRules, grant_id: str
) -> Held:
    grants = await _session_grants(store, workspace, wanted, rules)
    grant = find_held(grants, grant_id)
    if grant.kind == "always":
        if rules.revoke_always(grant.id) is None:
            raise GrantNotFoundError(f"grant {grant.id!r} was revoked meanwhile")
        return grant
    async with opened_store(store, existing=True) as persistence:
        try:
            lease = Leases.for_store(store_url(store)).take(grant.where)
        except SessionLiveError as err:
            raise SessionLiveError(
                f"{err}; revoke it there (/grants revoke {grant.id[:8]} in its chat) or once it "
                "is no longer running"
            ) from None
        try:
            await revoke_stored_grant(persistence, grant.where, grant.id, _revoker())
        finally:
            lease.release()
    return grant


def _revoker() -> str:
    try:
        return f"{REVOKED_BY} ({getpass.getuser()})"
    except Exception:  # no login name (a container without passwd entries)
        return REVOKED_BY


__all__ = ["HEADINGS", "Row", "app", "configured_rules", "held_row", "rule_row"]
