"""Permission rules and grants, decided: the one module the approval service consults
(``policy/_approval.py``), for every tool call (:func:`screen`) and for every ask
(:func:`verdict`).

What binds a session (:func:`binding_rules`): the rules its log captured at delegation
(``permission/rules``), and the composition's configured rules (:class:`PermissionRules`,
service ``permission_rules``: the user's ``tether.toml``, the user's ``allowed-always`` rules
for the workspace, a trusted workspace ``tether.toml`` and trusted ``.claude/settings*.json``).
A delegated child is bound by every ``deny`` and ``ask`` rule and by
no ``allow`` rule, and it holds no grant (``docs/decisions/0056``).

The precedence, the same whatever a rule's source (``docs/decisions/0057``):

1. a ``deny`` rule refuses the call, asked or not;
2. an ``ask`` rule makes the call ask, even where nothing else would; no grant or ``allow``
   rule skips that ask;
3. a session grant, then an ``allow`` rule, skips an ask the call would have made (a hook's,
   a gate's, an escalation's); it never lets a call run that was not going to ask, and never
   widens its sandbox unless it is for the escalation itself.

So no ``allow`` anywhere can widen a ``deny`` or an ``ask`` of any source: a workspace file
can add refusals and questions, and an ``allow`` only once the user trusted it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from tether.kernel import ServiceKey
from tether.policy._errors import (
    GrantNotFoundError,
    InvalidPermissionRuleError,
    InvalidPolicyEventError,
    RuleStoreError,
)
from tether.policy._events import GrantScope, PermissionRulesCaptured, RuleCited
from tether.policy._grants import SessionGrant, revoke_session_grant, session_grants
from tether.policy._modes import SandboxMode
from tether.policy._rule_store import RuleStore, StoredRule
from tether.policy._rules import CallFacts, PermissionRule, RuleOrigin, parse_rule
from tether.session import JsonValue, Session


class PermissionRules:
    """Service ``permission_rules``: the rules a composition decides by.

    ``configured`` are read once, at composition (the files they come from were read and
    checked for trust then). The user's ``allowed-always`` rules for ``workspace`` live in
    ``store`` and are re-read whenever their file changes, so a rule revoked from another
    terminal stops deciding at once. Without a ``store`` (or a ``workspace``) nothing can be
    allowed always.
    """

    def __init__(
        self,
        configured: Sequence[PermissionRule] = (),
        *,
        workspace: str | None = None,
        store: RuleStore | None = None,
        warnings: Sequence[str] = (),
    ) -> None:
        self.configured = tuple(configured)
        self.workspace = workspace
        self.store = store
        self.warnings = tuple(warnings)
        self._always: tuple[PermissionRule, ...] = ()
        self._stamp: tuple[int, int, int] | None = None
        self._read_once = False
        self.store_problem: str | None = None
        """Why the user's always rules could not be read last time (they are not applied)."""

    def always_refusal(self) -> str | None:
        """Why an ``allowed-always`` answer cannot be kept, else ``None``."""
        if self.store is None or self.workspace is None:
            return "no rule store is composed"
        return self.store.refusal(self.workspace)

    def always(self) -> tuple[PermissionRule, ...]:
        """The user's ``allowed-always`` rules for the workspace, as now on disk."""
        if self.store is None or self.workspace is None:
            return ()
        stamp = self.store.stamp(self.workspace)
        if self._read_once and stamp == self._stamp:
            return self._always
        try:
            stored = self.store.get(self.workspace).rules
            self.store_problem = None
        except RuleStoreError as err:
            stored = ()
            self.store_problem = str(err)
        file = str(self.store.path_for(self.workspace))
        rules: list[PermissionRule] = []
        for entry in stored:
            try:
                rule = parse_rule(
                    entry.rule,
                    "allow",
                    RuleOrigin.ALWAYS,
                    file=file,
                    escalate=entry.escalate,
                    rule_id=entry.id,
                )
            except InvalidPermissionRuleError:  # a hand-edited entry that is no rule
                continue
            rules.append(rule)
        self._always, self._stamp, self._read_once = tuple(rules), stamp, True
        return self._always

    def rules(self) -> tuple[PermissionRule, ...]:
        """Every configured rule and every always rule."""
        return self.configured + self.always()

    def add_always(
        self,
        scope: GrantScope,
        *,
        session: str,
        approval: str,
        granted_by: str | None,
    ) -> StoredRule:
        """Keep ``scope`` as an ``allow`` rule for the workspace; :class:`RuleStoreError` when
        it cannot be kept."""
        refusal = self.always_refusal()
        if refusal is not None or self.store is None or self.workspace is None:
            raise RuleStoreError(refusal or "no rule store is composed")
        return self.store.add(
            self.workspace,
            scope.rule,
            scope.target_mode,
            session=session,
            approval=approval,
            granted_by=granted_by,
        )

    def revoke_always(self, rule_id: str) -> StoredRule | None:
        if self.store is None or self.workspace is None:
            return None
        return self.store.remove(self.workspace, rule_id)


PERMISSION_RULES: Final[ServiceKey[PermissionRules]] = ServiceKey("permission_rules")
"""The :class:`PermissionRules` of a composition (none composed: no configured rules)."""


def cite(rule: PermissionRule) -> RuleCited:
    return RuleCited(rule.decision, rule.text, rule.origin, rule.file, rule.escalate)


def captured_rules(session: Session) -> tuple[PermissionRule, ...]:
    """The rules ``session``'s log captured at delegation (its last ``permission/rules``).
    A record that cannot be read raises ``INVALID_POLICY_EVENT``: a refusal it held is
    unknown, so the caller refuses (no ask is decided on a guess)."""
    last = session.last(PermissionRulesCaptured.TYPE)
    if last is None:
        return ()
    try:
        captured = PermissionRulesCaptured.from_data(last.data)
    except InvalidPolicyEventError as err:
        raise InvalidPolicyEventError(f"{PermissionRulesCaptured.TYPE} #{last.seq}: {err}") from err
    out: list[PermissionRule] = []
    for cited in captured.rules:
        try:
            out.append(
                parse_rule(cited.rule, cited.decision, RuleOrigin.DELEGATION, file=cited.file)
            )
        except InvalidPermissionRuleError as err:
            raise InvalidPolicyEventError(
                f"{PermissionRulesCaptured.TYPE} #{last.seq}: {err}"
            ) from err
    return tuple(out)


def is_child(session: Session) -> bool:
    return session.header.delegation_depth > 0


def binding_rules(service: PermissionRules | None, session: Session) -> list[PermissionRule]:
    """The rules that bind ``session``: its log's (a child's capture, cited first: that is
    why it is bound) and the composition's, without any ``allow`` rule for a delegated
    child."""
    rules = [*captured_rules(session), *(service.rules() if service is not None else ())]
    if is_child(session):
        return [rule for rule in rules if rule.decision != "allow"]
    return rules


def capture_for_child(
    service: PermissionRules | None, parent: Session
) -> PermissionRulesCaptured | None:
    """The ``permission/rules`` a child of ``parent`` is given: every ``deny`` and ``ask``
    rule that binds the parent now (``None``: there is none)."""
    kept: dict[tuple[str, str], RuleCited] = {}
    # The configured rules, not the always ones (allow rules all): no file is read here, so a
    # delegation stays synchronous and cheap.
    configured = service.configured if service is not None else ()
    for rule in (*configured, *captured_rules(parent)):
        if rule.decision != "allow":
            cited = cite(rule)
            kept.setdefault((cited.decision, cited.rule), cited)
    return PermissionRulesCaptured(tuple(kept.values())) if kept else None


@dataclass(frozen=True, slots=True)
class Verdict:
    """What rules and grants say of one call: ``None`` when nothing covers it."""

    decision: Literal["deny", "ask", "allow"] | None = None
    rule: PermissionRule | None = None
    grant: SessionGrant | None = None


NO_VERDICT: Final = Verdict()


def verdict(
    rules: Sequence[PermissionRule],
    session: Session,
    facts: CallFacts,
    *,
    may_allow: bool,
) -> Verdict:
    """The precedence of the module docstring over ``facts``: a ``deny`` rule, an ``ask``
    rule, then (``may_allow``: an ask of a top-level session's own) a grant of ``session``,
    then an ``allow`` rule."""
    for decision in ("deny", "ask"):
        for rule in rules:
            if rule.decision == decision and rule.covers(facts):
                return Verdict(rule.decision, rule)
    if not may_allow or is_child(session):
        return NO_VERDICT
    for grant in session_grants(session):
        if grant.rule.covers(facts):
            return Verdict("allow", grant=grant)
    for rule in rules:
        if rule.decision == "allow" and rule.covers(facts):
            return Verdict("allow", rule)
    return NO_VERDICT


@dataclass(frozen=True, slots=True)
class Held:
    """A grant in force, as listed and revoked: a session grant of one session, or one of the
    user's always rules for the workspace."""

    kind: Literal["session", "always"]
    id: str
    rule: str
    target_mode: SandboxMode | None
    since: int
    """When it was granted (epoch milliseconds)."""
    by: str | None
    """Who granted it (the answerer)."""
    where: str
    """The session it holds for, or the file that keeps it."""

    def describe(self) -> str:
        up = f", escalating up to {self.target_mode.value}" if self.target_mode else ""
        return f"{self.rule}{up}"


def held_grants(rules: PermissionRules | None, session: Session | None) -> list[Held]:
    """``session``'s grants in force (none for a child), then the user's always rules for the
    workspace. Raises ``RULE_STORE`` when the always rules cannot be read."""
    found: list[Held] = []
    if session is not None:
        for grant in session_grants(session):
            found.append(
                Held(
                    "session",
                    grant.id,
                    grant.scope.rule,
                    grant.scope.target_mode,
                    grant.time,
                    grant.event.granted_by,
                    session.id,
                )
            )
    if rules is not None and rules.store is not None and rules.workspace is not None:
        file = str(rules.store.path_for(rules.workspace))
        for stored in rules.store.get(rules.workspace).rules:
            found.append(
                Held(
                    "always",
                    stored.id,
                    stored.rule,
                    stored.escalate,
                    stored.added_at,
                    stored.granted_by,
                    file,
                )
            )
    return found


def find_held(grants: Sequence[Held], wanted: str) -> Held:
    """The grant whose id is ``wanted`` or starts with it (uniquely); ``GRANT_NOT_FOUND``."""
    exact = [grant for grant in grants if grant.id == wanted]
    found = exact or [grant for grant in grants if wanted and grant.id.startswith(wanted)]
    if len(found) != 1:
        why = "matches several grants" if found else "is not a grant in force"
        raise GrantNotFoundError(
            f"grant {wanted!r} {why}; tether grants list (or /grants in tether chat) lists them"
        )
    return found[0]


def revoke(rules: PermissionRules | None, session: Session | None, wanted: str, *, by: str) -> Held:
    """Revoke the grant ``wanted`` names (an id or a unique prefix): a session grant of
    ``session`` gets its ``approval/grant-revoked`` (the caller flushes it), an always rule
    leaves the user's rules file."""
    grant = find_held(held_grants(rules, session), wanted)
    if grant.kind == "session" and session is not None:
        match = next(g for g in session_grants(session) if g.id == grant.id)
        revoke_session_grant(session, match, by)
    elif rules is not None and rules.revoke_always(grant.id) is None:
        raise GrantNotFoundError(f"grant {grant.id!r} was revoked meanwhile")
    return grant


def call_facts(
    tool: str,
    action: Mapping[str, JsonValue] | None,
    target_mode: SandboxMode | None,
    workspace: str,
    env: Mapping[str, str] | None = None,
) -> CallFacts:
    """The facts of one call, from what an ask records of it (its ``action``)."""
    fields = action or {}
    command, path = fields.get("command"), fields.get("path")
    environ = os.environ if env is None else env
    return CallFacts(
        tool,
        command if isinstance(command, str) else None,
        path if isinstance(path, str) else None,
        target_mode,
        workspace,
        environ.get("HOME") or os.path.expanduser("~"),
    )


__all__ = [
    "NO_VERDICT",
    "PERMISSION_RULES",
    "Held",
    "PermissionRules",
    "Verdict",
    "binding_rules",
    "call_facts",
    "capture_for_child",
    "captured_rules",
    "cite",
    "find_held",
    "held_grants",
    "is_child",
    "revoke",
    "verdict",
]
