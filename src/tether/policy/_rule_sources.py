"""Where permission rules come from, read into :class:`~tether.policy._rules.PermissionRule`.

- ``[permissions]`` in a ``tether.toml``: the user's own file (origin ``user``), a
  configuration file outside the workspace that the caller named (``user`` too: it is theirs),
  or the workspace's, once trusted (``workspace``)::

      [permissions]
      allow = ["Bash(npm test:*)", "Edit(src/**)"]
      ask = ["Bash(git push:*)"]
      deny = ["Read(./secrets/**)", "Bash(curl:*)"]

      [permissions.escalate]            # allow rules that also allow an escalation, up to
      workspace-write = ["Bash(npm install:*)"]   # that mode, without asking

  A key other than these four, or a rule that is not a rule, is ``INVALID_PERMISSION_RULE``:
  the run does not start.
- ``permissions`` in a workspace's ``.claude/settings.json`` and
  ``.claude/settings.local.json``, once trusted (``claude-settings``). Their ``allow``, ``ask``
  and ``deny`` lists are read; other keys (``defaultMode``, ``additionalDirectories``) are not
  applied and a warning says so.

A rule whose specifier is not understood (:class:`~tether.policy._rules.Unsupported`) never
fails open: an ``allow`` one is dropped, a ``deny`` or ``ask`` one covers its whole tool, and a
warning says which.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from tether.kernel import WorkspaceTrust
from tether.kernel._config import read_user_config, user_config_path
from tether.kernel._printable import printable
from tether.kernel._workspace_trust import InspectedWorkspace, trust_command_line
from tether.policy._errors import InvalidPermissionRuleError
from tether.policy._modes import ESCALATION_TARGETS, SandboxMode
from tether.policy._permissions import PermissionRules
from tether.policy._rule_store import RuleStore
from tether.policy._rules import (
    RULE_DECISIONS,
    PermissionRule,
    RuleDecision,
    RuleOrigin,
    Unsupported,
    parse_rule,
)

PERMISSIONS_SECTION: Final = "permissions"
ESCALATE_KEY: Final = "escalate"
CLAUDE_APPLIED: Final = frozenset(RULE_DECISIONS)
"""The keys of Claude Code's ``permissions`` object that tether applies."""


@dataclass(frozen=True, slots=True)
class LoadedRules:
    """Rules read from one or more sources, and what was not applied of them."""

    rules: tuple[PermissionRule, ...] = ()
    warnings: tuple[str, ...] = field(default=())

    def __add__(self, other: LoadedRules) -> LoadedRules:
        return LoadedRules(self.rules + other.rules, self.warnings + other.warnings)


def _rule_list(value: object, where: str) -> list[object]:
    if not isinstance(value, list):
        raise InvalidPermissionRuleError(f"{where} must be a list of rules, got {value!r}")
    return value


def _accept(rule: PermissionRule, warnings: list[str]) -> PermissionRule | None:
    """``rule`` as applied: an unsupported ``allow`` dropped, an unsupported ``deny`` or
    ``ask`` kept (it covers its whole tool), each with a warning."""
    if not isinstance(rule.matcher, Unsupported):
        return rule
    where = f"{rule.file}: " if rule.file else ""
    problem = rule.matcher.problem
    if rule.decision == "allow":
        warnings.append(f'{where}allow rule "{rule.text}" is not applied ({problem})')
        return None
    warnings.append(
        f'{where}{rule.decision} rule "{rule.text}" applies to every call of its tool ({problem})'
    )
    return rule


def _read_lists(
    table: Mapping[str, object],
    decisions: Sequence[RuleDecision],
    origin: RuleOrigin,
    file: str,
    warnings: list[str],
    *,
    escalate: SandboxMode | None = None,
    prefix: str = "permissions",
) -> list[PermissionRule]:
    rules: list[PermissionRule] = []
    for decision in decisions:
        if decision not in table:
            continue
        for text in _rule_list(table[decision], f"{file}: {prefix}.{decision}"):
            rule = parse_rule(text, decision, origin, file=file, escalate=escalate)
            accepted = _accept(rule, warnings)
            if accepted is not None:
                rules.append(accepted)
    return rules


def rules_of_table(table: object, origin: RuleOrigin, file: str) -> LoadedRules:
    """The rules of a ``tether.toml``'s ``[permissions]`` table (see the module docstring)."""
    if table is None:
        return LoadedRules()
    if not isinstance(table, Mapping):
        raise InvalidPermissionRuleError(f"{file}: [permissions] must be a table")
    unknown = sorted(set(table) - {*RULE_DECISIONS, ESCALATE_KEY})
    if unknown:
        raise InvalidPermissionRuleError(
            f"{file}: [permissions] has unknown keys {', '.join(map(repr, unknown))} (accepted: "
            f"allow, ask, deny, escalate)"
        )
    warnings: list[str] = []
    rules = _read_lists(table, RULE_DECISIONS, origin, file, warnings)
    escalate = table.get(ESCALATE_KEY, {})
    if not isinstance(escalate, Mapping):
        raise InvalidPermissionRuleError(f"{file}: [permissions.escalate] must be a table")
    targets = {mode.value: mode for mode in ESCALATION_TARGETS}
    for key, listed in escalate.items():
        mode = targets.get(str(key))
        if mode is None:
            raise InvalidPermissionRuleError(
                f"{file}: [permissions.escalate] key {key!r} is not an escalation target "
                f"(accepted: {', '.join(targets)})"
            )
        rules += _read_lists(
            {"allow": listed},
            ("allow",),
            origin,
            file,
            warnings,
            escalate=mode,
            prefix=f"permissions.escalate.{key}",
        )
    return LoadedRules(tuple(rules), tuple(warnings))


def rules_of_claude_settings(data: bytes, file: str) -> LoadedRules:
    """The rules of a Claude Code settings file's ``permissions`` (none without one)."""
    try:
        parsed: object = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise InvalidPermissionRuleError(f"{file}: not valid JSON: {err}") from None
    permissions = parsed.get(PERMISSIONS_SECTION) if isinstance(parsed, Mapping) else None
    if permissions is None:
        return LoadedRules()
    if not isinstance(permissions, Mapping):
        raise InvalidPermissionRuleError(f"{file}: permissions must be an object")
    warnings = [
        f"{file}: permissions.{key} is not applied (tether's scope is its sandbox mode and "
        "approval policy: --sandbox, --approval, /permission)"
        for key in sorted(set(permissions) - CLAUDE_APPLIED)
    ]
    rules = _read_lists(permissions, RULE_DECISIONS, RuleOrigin.CLAUDE_SETTINGS, file, warnings)
    return LoadedRules(tuple(rules), tuple(warnings))


def load_permission_rules(
    inspected: InspectedWorkspace,
    env: Mapping[str, str] | None = None,
    *,
    store: RuleStore | None = None,
) -> PermissionRules:
    """The rules a composition over ``inspected`` decides by: the user's ``tether.toml``, the
    configuration ``inspected`` uses (the workspace's, once trusted, or the caller's), and each
    trusted Claude Code settings file; with the user's always rules (``store``, by default
    theirs) for the workspace. Raises ``INVALID_PERMISSION_RULE`` (and ``CONFIG_FILE`` for an
    unreadable user file)."""
    loaded = LoadedRules()
    user = read_user_config(env)
    if user is not None:
        table = (user.model_extra or {}).get(PERMISSIONS_SECTION)
        loaded += rules_of_table(table, RuleOrigin.USER, str(user_config_path(env)))
    used = inspected.config_in_force()
    if used is not None:
        origin = RuleOrigin.WORKSPACE if used.in_workspace else RuleOrigin.USER
        table = (used.config.model_extra or {}).get(PERMISSIONS_SECTION)
        loaded += rules_of_table(table, origin, used.key)
    for report in inspected.permission_settings():
        content = report.snapshot.content
        if content is not None and inspected.usable(report):
            loaded += rules_of_claude_settings(content, report.key)
    return PermissionRules(
        loaded.rules,
        workspace=inspected.root,
        store=store if store is not None else RuleStore.for_user(env),
        warnings=loaded.warnings,
    )


def unused_settings_lines(inspected: InspectedWorkspace) -> list[str]:
    """One line, escaped, per Claude Code settings file with ``permissions`` rules that a
    composition over ``inspected`` does not apply (its content is not trusted, or the
    workspace's configuration is ignored), saying how to apply them."""
    trust = trust_command_line(inspected.root)
    lines: list[str] = []
    for report in inspected.permission_settings():
        content = report.snapshot.content
        if content is None or inspected.usable(report):
            continue
        try:
            rules = rules_of_claude_settings(content, report.key).rules
        except InvalidPermissionRuleError:
            rules = ()  # tether trust shows the file; trusting it reports the problem
        counts = [
            f"{decision}: {n}"
            for decision in RULE_DECISIONS
            if (n := sum(rule.decision == decision for rule in rules))
        ]
        if not counts:
            continue
        why = (
            "this run ignores the workspace's configuration"
            if inspected.trust is WorkspaceTrust.IGNORE
            else "its content is not trusted"
        )
        lines.append(
            f"{printable(report.key)} has permissions rules ({', '.join(counts)}) that are not "
            f"applied: {why}; review and trust it with: {trust}"
        )
    return lines


__all__ = [
    "CLAUDE_APPLIED",
    "ESCALATE_KEY",
    "PERMISSIONS_SECTION",
    "LoadedRules",
    "load_permission_rules",
    "rules_of_claude_settings",
    "rules_of_table",
    "unused_settings_lines",
]
