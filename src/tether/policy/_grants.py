"""Grants: the scopes an answer may widen to, and the session grants a log holds.

:func:`scope_offers` is what a question offers its answerer, narrowest first (the default):

- ``bash``: the exact command (``Bash(npm test --watch)``, left out when the command holds a
  ``*``, which a rule would read as a wildcard); when the command is plain
  (:func:`~tether.policy._shell_words.plain_words`), its first two words and its first word as
  prefixes (``Bash(npm test:*)``, ``Bash(npm:*)``), unless its first word is not the program
  that runs (``FOO=1 make``, ``timeout 5 make``, ``sudo``, ``bash -c``:
  :func:`~tether.policy._shell_words.runs_another_command`), where a prefix would cover every
  command; the tool (``Bash``);
- a file tool: the exact path (``Write(./src/a.py)``, ``//`` for an absolute path outside the
  workspace), its directory and everything under it (``Write(./src/**)``), the tool;
- any other tool: the tool.

An escalation's offers carry its target mode: the grant also lets that escalation (or a
narrower one) run without asking. Every offer covers the asked call (``tests`` hold it).

:func:`session_grants` folds a log's ``approval/grant`` events (those that hold for the
session) minus its ``approval/grant-revoked`` ones. A delegated child never holds a grant:
its log is not folded at all (``docs/decisions/0056-grants-never-reach-children.md``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from tether.errors import TetherError
from tether.policy._errors import (
    CannotRevokeError,
    GrantNotFoundError,
    InvalidPolicyEventError,
)
from tether.policy._events import ApprovalGranted, GrantRevoked, GrantScope, ScopeKind
from tether.policy._rules import (
    COMMAND_TOOLS,
    PATH_TOOLS,
    CallFacts,
    PermissionRule,
    RuleOrigin,
    command_prefix_text,
    escape_path,
    parse_rule,
    rule_text,
)
from tether.policy._shell_words import plain_words, runs_another_command
from tether.session import Event, Persistence, Session, SessionHeader
from tether.session._session import wall_clock_ms

PREFIX_WORDS = (2, 1)
"""The prefixes a plain command is offered as, by word count, narrowest first."""


@dataclass(frozen=True, slots=True)
class SessionGrant:
    """A grant that decides a session's later asks: its event and its scope read as a rule."""

    event: ApprovalGranted
    rule: PermissionRule
    time: int
    """When it was granted (epoch milliseconds)."""

    @property
    def id(self) -> str:
        return self.event.id

    @property
    def scope(self) -> GrantScope:
        return self.event.scope


def scope_rule(scope: GrantScope, *, origin: RuleOrigin = RuleOrigin.SESSION) -> PermissionRule:
    """The ``allow`` rule a grant's scope is (its target mode as the escalation it allows)."""
    return parse_rule(scope.rule, "allow", origin, escalate=scope.target_mode)


def _path_specifier(facts: CallFacts, path: str) -> str:
    """How a grant names ``path`` (absolute): ``./rel`` under the workspace, else ``//abs``."""
    root = facts.workspace.rstrip("/")
    if path == root:
        return "."
    if path.startswith(root + "/"):
        return "./" + escape_path(path[len(root) + 1 :])
    return "/" + escape_path(path)


def scope_offers(facts: CallFacts) -> tuple[GrantScope, ...]:
    """The scopes a question about ``facts`` offers, narrowest first (module docstring)."""
    mode = facts.target_mode
    found: list[tuple[ScopeKind, str]] = []
    if facts.tool in COMMAND_TOOLS and facts.command is not None:
        command = facts.command
        if "*" not in command and command.strip():
            found.append(("exact", rule_text(facts.tool, command)))
        words = plain_words(command)
        if words is not None and not runs_another_command(words):
            for count in PREFIX_WORDS:
                if count <= len(words) and "*" not in "".join(words[:count]):
                    prefix = command_prefix_text(words[:count])
                    found.append(("prefix", rule_text(facts.tool, f"{prefix}:*")))
    elif facts.tool in PATH_TOOLS:
        paths = facts.paths()
        if len(paths) == 1:  # a path that leads elsewhere through a link gets the tool only
            path = paths[0]
            found.append(("exact", rule_text(facts.tool, _path_specifier(facts, path))))
            parent = os.path.dirname(path)
            if parent not in (path, "/"):
                under = _path_specifier(facts, parent) + "/**"
                found.append(("path", rule_text(facts.tool, under)))
    found.append(("tool", rule_text(facts.tool)))
    offers: list[GrantScope] = []
    for kind, text in found:
        scope = GrantScope(kind, text, mode)
        if scope.rule not in (o.rule for o in offers) and scope_rule(scope).covers(facts):
            offers.append(scope)
    return tuple(offers)


def session_grants(session: Session) -> list[SessionGrant]:
    """The grants that decide ``session``'s later asks, oldest first (:func:`fold_grants`),
    folded incrementally: each ask reads only the events since the last (``Session.fold``)."""
    if session.last(ApprovalGranted.TYPE) is None or session.header.delegation_depth > 0:
        return []
    return list(session.fold(_Grants).granted.values())


def fold_grants(header: SessionHeader, events: Iterable[Event]) -> list[SessionGrant]:
    """The grants a log holds, oldest first: none for a delegated child (module docstring).
    A grant event that cannot be read grants nothing; a revocation that cannot be read raises
    ``INVALID_POLICY_EVENT`` (which grant it ended is unknown, so no grant can be trusted)."""
    if header.delegation_depth > 0:
        return []
    fold = _Grants()
    for event in events:
        fold.feed(event)
    return list(fold.granted.values())


class _Grants:
    """The session grants in force, fed one event at a time (a ``LogFold``)."""

    __slots__ = ("granted",)

    def __init__(self) -> None:
        self.granted: dict[str, SessionGrant] = {}

    def feed(self, event: Event) -> None:
        if event.type == ApprovalGranted.TYPE:
            try:
                grant = ApprovalGranted.from_data(event.data)
                rule = scope_rule(grant.scope)
            except TetherError:  # a damaged record: narrower to drop it than to guess
                return
            if grant.for_session:
                self.granted[grant.id] = SessionGrant(grant, rule, event.time)
        elif event.type == GrantRevoked.TYPE:
            try:
                revoked = GrantRevoked.from_data(event.data)
            except InvalidPolicyEventError as err:
                raise InvalidPolicyEventError(
                    f"{GrantRevoked.TYPE} event #{event.seq}: {err}; the session's grants "
                    "cannot be known"
                ) from err
            self.granted.pop(revoked.id, None)


def revoke_session_grant(session: Session, grant: SessionGrant, by: str) -> None:
    """Append ``approval/grant-revoked {id, by}``: ``grant`` decides nothing from here on."""
    revoked = GrantRevoked(grant.id, by)
    session.append(revoked.TYPE, revoked.to_data())


async def revoke_stored_grant(
    persistence: Persistence, session_id: str, grant_id: str, by: str
) -> SessionGrant:
    """End session grant ``grant_id`` of a session that is not live in this process, by
    appending ``approval/grant-revoked`` to its stored log (the caller holds its lease).

    As with narrowing a stored child (``subagents/_narrowing.py``), a log whose last turn is
    still open (running, or interrupted) is refused rather than repaired under its owner; so
    is a grant that is not in force. Raises ``GRANT_NOT_FOUND``."""
    stored = await persistence.inspect(session_id)
    found = [g for g in fold_grants(stored.header, stored.events) if g.id == grant_id]
    if not found:
        raise GrantNotFoundError(f"session {session_id} holds no grant {grant_id!r} in force")
    if stored.repair.changed:
        raise CannotRevokeError(
            f"session {session_id} has an unfinished turn or a damaged log (it is running, or "
            "was interrupted); revoke the grant from the process that runs it (/grants revoke "
            "in its chat), or repair it first with `tether sessions fsck --repair`"
        )
    revoked = GrantRevoked(grant_id, by)
    event = Event.make(revoked.TYPE, len(stored.events), wall_clock_ms(), revoked.to_data())
    await persistence.append(session_id, [event])
    return found[0]


__all__ = [
    "PREFIX_WORDS",
    "SessionGrant",
    "fold_grants",
    "revoke_session_grant",
    "revoke_stored_grant",
    "scope_offers",
    "scope_rule",
    "session_grants",
]
