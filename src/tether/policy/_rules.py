"""Permission rules in Claude Code's syntax: what one rule says, and whether it covers a call.

A rule is ``Tool`` or ``Tool(specifier)`` with a decision, ``allow``, ``ask`` or ``deny``
(``docs/guide-permissions.md``, "Permission rules"):

- ``Bash`` / ``Bash(*)``: every ``bash`` call. ``Bash(npm test)``: that exact command string.
  ``Bash(npm test:*)``: the command ``npm test`` with any arguments, as
  :mod:`tether.policy._shell_words` reads commands (a plain command for what allows; every
  command a compound one may run, for what refuses or asks). A ``*`` anywhere else is not
  understood.
- ``Read(pattern)``, ``Edit(pattern)``, ``Write(pattern)`` (and ``Glob``, ``Grep``, ``LS``):
  a path pattern. ``//abs/path`` is absolute, ``~/path`` is under your home, ``/path``,
  ``./path`` and ``path/x`` are relative to the session's workspace; a pattern without a
  ``/`` (``.env``, ``*.pem``) matches a file or directory of that name anywhere. ``*``, ``?``
  and ``[...]`` match within one path component, ``**`` any number of them, and ``dir/**``
  covers ``dir`` itself too. ``Read`` also covers ``ls``, ``glob`` and ``grep``; ``Edit``
  covers ``write`` too (as Claude Code's rules do).
- Any other name is a tool's name, exactly: ``mcp__server__tool``, ``subagent``; ``mcp__server``
  covers every tool of that server. Such a rule takes no specifier.

:meth:`PermissionRule.covers` applies one rule to the facts of one call
(:class:`CallFacts`). A specifier this module cannot read makes an unsupported rule, which fails
closed: an ``allow`` one covers nothing, a ``deny`` or ``ask`` one its whole tool (the loader
says so, :mod:`tether.policy._rule_sources`).
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Final, Literal, TypeAlias, get_args

from tether.policy._errors import InvalidPermissionRuleError
from tether.policy._modes import SandboxMode, is_strictly_wider
from tether.policy._shell_words import (
    command_segments,
    plain_words,
    segment_programs,
    starts_with,
)

RuleDecision: TypeAlias = Literal["deny", "ask", "allow"]
"""What a rule decides, strongest first: the precedence order."""

RULE_DECISIONS: Final[tuple[RuleDecision, ...]] = get_args(RuleDecision)


class RuleOrigin(StrEnum):
    """Where a rule came from (shown with it, and in every decision it makes)."""

    USER = "user"
    """The user's own ``tether.toml`` (or a configuration file outside the workspace that the
    caller named, which is theirs too)."""
    ALWAYS = "always"
    """The user's rules for this workspace, added by ``allowed-always`` answers
    (:mod:`tether.policy._rule_store`)."""
    WORKSPACE = "workspace"
    """The workspace's ``tether.toml``, once trusted."""
    CLAUDE_SETTINGS = "claude-settings"
    """A workspace's ``.claude/settings.json`` or ``.claude/settings.local.json``, once
    trusted."""
    DELEGATION = "delegation"
    """Captured from the delegating parent into a child's log (``permission/rules``)."""
    SESSION = "session"
    """A session grant's scope, read as a rule (never loaded from a file)."""


COMMAND_TOOLS: Final = frozenset({"bash"})
"""Tools whose calls carry a ``command``."""
PATH_TOOLS: Final = frozenset({"read", "write", "edit", "ls", "glob", "grep"})
"""Tools whose calls carry a ``path`` (``glob`` and ``grep`` default to the workspace)."""

CLAUDE_TOOL_NAMES: Final[Mapping[str, frozenset[str]]] = MappingProxyType(
    {
        "Bash": frozenset({"bash"}),
        "Read": frozenset({"read", "ls", "glob", "grep"}),
        "Edit": frozenset({"edit", "write"}),
        "MultiEdit": frozenset({"edit"}),
        "Write": frozenset({"write"}),
        "Glob": frozenset({"glob"}),
        "Grep": frozenset({"grep"}),
        "LS": frozenset({"ls"}),
    }
)
"""Claude Code's tool names and the tether tools each covers."""

OWN_NAMES: Final[Mapping[str, str]] = MappingProxyType(
    {"bash": "Bash", "read": "Read", "write": "Write", "edit": "Edit", "ls": "LS",
     "glob": "Glob", "grep": "Grep"}
)  # fmt: skip
"""How a grant names a tether tool in a rule (its own Claude Code name)."""

_RULE: Final = re.compile(r"^([A-Za-z0-9_.-]+)(?:\((.*)\))?$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class CallFacts:
    """What rules look at in one call: its tool, its ``command`` or ``path`` as given, the
    mode an escalation asks for, and where relative paths and ``~`` lead."""

    tool: str
    command: str | None = None
    path: str | None = None
    target_mode: SandboxMode | None = None
    workspace: str = "/"
    """The session's canonical workspace root."""
    home: str = "/"

    def paths(self) -> tuple[str, ...]:
        """The call's path as written (made absolute, ``..`` collapsed) and where it leads
        (links resolved); one path when they agree, none for a call without one."""
        if self.tool not in PATH_TOOLS:
            return ()
        given = self.path if self.path is not None else "."
        lexical = os.path.normpath(os.path.join(self.workspace, given))
        try:
            real = os.path.realpath(lexical)
        except (OSError, ValueError):
            real = lexical
        return (lexical,) if real == lexical else (lexical, real)


@dataclass(frozen=True, slots=True)
class AnyCall:
    """``Tool`` or ``Tool(*)``."""

    def covers(self, facts: CallFacts, *, strict: bool) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class ExactCommand:
    """``Bash(text)``: that command string."""

    text: str

    def covers(self, facts: CallFacts, *, strict: bool) -> bool:
        return _covers_exact(self.text, facts.command, strict=strict)


@dataclass(frozen=True, slots=True)
class CommandPrefix:
    """``Bash(words:*)``: a command whose words start with ``words``."""

    words: tuple[str, ...]

    def covers(self, facts: CallFacts, *, strict: bool) -> bool:
        return _covers_prefix(self.words, facts.command, strict=strict)


@dataclass(frozen=True, slots=True)
class PathPattern:
    """``Read(pattern)`` and the other file tools' rules."""

    pattern: str

    def covers(self, facts: CallFacts, *, strict: bool) -> bool:
        return _covers_path(self.pattern, facts, strict=strict)


@dataclass(frozen=True, slots=True)
class Unsupported:
    """A specifier this module cannot read; ``problem`` says why."""

    problem: str

    def covers(self, facts: CallFacts, *, strict: bool) -> bool:
        # Fail closed: a deny or ask covers its whole tool, an allow nothing (the loader says
        # so when it reads one).
        return not strict


Matcher: TypeAlias = AnyCall | ExactCommand | CommandPrefix | PathPattern | Unsupported


@dataclass(frozen=True, slots=True)
class PermissionRule:
    """One rule, where it came from, and (for an ``allow``) the sandbox mode up to which it
    also allows an escalation without asking (``None``: it never does)."""

    decision: RuleDecision
    text: str
    """The rule as written (``Bash(npm test:*)``)."""
    tools: frozenset[str]
    """The tether tools it covers; a name ending in ``__`` covers every tool it starts."""
    matcher: Matcher
    origin: RuleOrigin
    file: str | None = None
    """The file it came from, when one did."""
    escalate: SandboxMode | None = None
    id: str | None = None
    """The id of an ``allowed-always`` rule in the user's rules file (to revoke it by)."""

    def names_tool(self, tool: str) -> bool:
        return tool in self.tools or any(
            name.endswith("__") and tool.startswith(name) for name in self.tools
        )

    def covers(self, facts: CallFacts) -> bool:
        """Whether this rule decides ``facts``: an ``allow`` reads the call strictly (a plain
        command, every path the call names, an escalation no wider than it allows), a
        ``deny`` or ``ask`` generously (any command the string may run, any path)."""
        if not self.names_tool(facts.tool):
            return False
        strict = self.decision == "allow"
        if (
            strict
            and facts.target_mode is not None
            and (self.escalate is None or is_strictly_wider(facts.target_mode, self.escalate))
        ):
            return False  # an allow covers an escalation only up to the mode it names
        return self.matcher.covers(facts, strict=strict)

    def describe(self) -> str:
        return describe_rule(self.decision, self.text, self.origin, self.file, self.escalate)


def describe_rule(
    decision: RuleDecision,
    text: str,
    origin: RuleOrigin,
    file: str | None,
    escalate: SandboxMode | None,
) -> str:
    """``deny rule "Bash(rm:*)" (from /home/me/.config/tether/tether.toml)``: a rule as every
    refusal, question and listing names it."""
    where = f"from {file}" if file else f"{origin.value} rule"
    if origin is RuleOrigin.DELEGATION:
        where = "captured at delegation" + (f" from {file}" if file else "")
    elif origin is RuleOrigin.SESSION:
        where = "a session grant"
    up = f", escalation up to {escalate.value}" if escalate else ""
    return f'{decision} rule "{text}" ({where}{up})'


def _covers_exact(text: str, command: str | None, *, strict: bool) -> bool:
    if command is None:
        return False
    if command == text:
        return True
    if strict:
        return False
    wanted = _program(plain_words(text) or tuple(text.split()))
    if not wanted or wanted[0] not in segment_programs(command):
        return False
    return any(words == wanted for words in command_segments(command))


def _covers_prefix(prefix: tuple[str, ...], command: str | None, *, strict: bool) -> bool:
    if command is None:
        return False
    if strict:
        words = plain_words(command)
        return words is not None and starts_with(words, prefix)
    wanted = _program(prefix)
    if not wanted or wanted[0] not in segment_programs(command):
        return False  # the common case, without reading every segment
    return any(starts_with(words, wanted) for words in command_segments(command))


@functools.lru_cache(maxsize=1024)
def _program(words: tuple[str, ...]) -> tuple[str, ...]:
    """``words`` with the program's directory dropped, as :func:`command_segments` reads."""
    if not words:
        return words
    return (os.path.basename(words[0]) or words[0], *words[1:])


def _covers_path(pattern: str, facts: CallFacts, *, strict: bool) -> bool:
    paths = facts.paths()
    if not paths:
        return False
    results = [_path_matches(pattern, path, facts) for path in paths]
    return all(results) if strict else any(results)


def _path_matches(pattern: str, path: str, facts: CallFacts) -> bool:
    parts = [p for p in path.split("/") if p]
    anywhere = _anywhere_name(pattern)
    if anywhere is not None:
        return any(fnmatch.fnmatchcase(part, anywhere) for part in parts)
    absolute = resolve_pattern(pattern, facts.workspace, facts.home)
    if absolute.endswith("/"):
        absolute += "**"  # a directory: everything under it
    return _components_match([p for p in absolute.split("/") if p], parts)


def _anywhere_name(pattern: str) -> str | None:
    """The name a slash-less pattern (``.env``, ``*.pem``) matches anywhere, else ``None``."""
    if "/" in pattern or pattern.startswith("~"):
        return None
    return pattern


def resolve_pattern(pattern: str, workspace: str, home: str) -> str:
    """A path pattern made absolute (see the module docstring). The workspace and the home
    it is joined to are paths, not patterns: their wildcard characters are made literal (a
    workspace ``/w/app?`` would otherwise let ``./src/**`` cover ``/w/appX/src``, and a
    ``deny`` under ``/w/proj[1]`` cover nothing of it)."""
    if pattern.startswith("//"):
        return pattern[1:]
    if pattern == "~" or pattern.startswith("~/"):
        return escape_path(home.rstrip("/")) + pattern[1:]
    root = escape_path(workspace.rstrip("/"))
    if pattern.startswith("/"):
        return root + pattern
    rest = pattern[2:] if pattern.startswith("./") else pattern
    return root + "/" + rest


def _components_match(pattern: list[str], parts: list[str]) -> bool:
    """Whether ``parts`` match ``pattern`` component by component, ``**`` spanning any
    number (none included); linear in their lengths' product, never backtracking."""

    def closure(states: set[int]) -> set[int]:
        out = set(states)
        todo = list(states)
        while todo:
            i = todo.pop()
            if i < len(pattern) and pattern[i] == "**" and i + 1 not in out:
                out.add(i + 1)
                todo.append(i + 1)
        return out

    states = closure({0})
    for part in parts:
        moved: set[int] = set()
        for i in states:
            if i >= len(pattern):
                continue
            if pattern[i] == "**":
                moved.add(i)
            elif fnmatch.fnmatchcase(part, pattern[i]):
                moved.add(i + 1)
        states = closure(moved)
        if not states:
            return False
    return len(pattern) in states


def escape_path(path: str) -> str:
    """``path`` with the characters a pattern reads as wildcards made literal."""
    return re.sub(r"([*?\[])", r"[\1]", path)


def _tools_named(name: str) -> frozenset[str]:
    own = CLAUDE_TOOL_NAMES.get(name)
    if own is not None:
        return own
    if name.startswith("mcp__") and name.count("__") == 1:
        return frozenset({name + "__"})  # a whole server
    return frozenset({name})


def _matcher(name: str, tools: frozenset[str], spec: str | None) -> Matcher:
    if spec is None or spec in ("", "*"):
        return AnyCall()
    if tools <= COMMAND_TOOLS:
        return _command_matcher(spec)
    if tools <= PATH_TOOLS:
        return PathPattern(spec)
    return Unsupported(f"{name} takes no specifier")


def _command_matcher(spec: str) -> Matcher:
    if spec.endswith(":*"):
        head = spec[:-2]
        words = plain_words(head)
        if words is None or "*" in head:
            return Unsupported(
                "a command prefix must be plain words (no shell operators, quotes closed)"
            )
        return CommandPrefix(words)
    if "*" in spec:
        return Unsupported("a * inside a command is not understood (only a trailing :*)")
    return ExactCommand(spec)


def parse_rule(
    text: object,
    decision: RuleDecision,
    origin: RuleOrigin,
    *,
    file: str | None = None,
    escalate: SandboxMode | None = None,
    rule_id: str | None = None,
) -> PermissionRule:
    """One rule from its text; :class:`InvalidPermissionRuleError` when it is not a rule at
    all (not a string, empty, unbalanced). A rule whose specifier is not understood is
    returned with an :class:`Unsupported` matcher for the loader to handle."""
    where = f"{file}: " if file else ""
    if not isinstance(text, str):
        raise InvalidPermissionRuleError(f"{where}a {decision} rule must be a string, got {text!r}")
    found = _RULE.match(text.strip())
    if found is None:
        raise InvalidPermissionRuleError(
            f"{where}{decision} rule {text!r} is not Tool or Tool(specifier) (examples: "
            '"Bash(npm test:*)", "Read(./secrets/**)", "mcp__server__tool")'
        )
    name, spec = found.group(1), found.group(2)
    if escalate is not None and decision != "allow":
        raise InvalidPermissionRuleError(f"{where}only an allow rule can allow an escalation")
    tools = _tools_named(name)
    return PermissionRule(
        decision,
        text.strip(),
        tools,
        _matcher(name, tools, spec),
        origin,
        file,
        escalate,
        rule_id,
    )


def rule_text(tool: str, specifier: str | None = None) -> str:
    """How a grant writes its scope as a rule for tether tool ``tool``."""
    name = OWN_NAMES.get(tool, tool)
    return name if specifier is None else f"{name}({specifier})"


def command_prefix_text(words: tuple[str, ...]) -> str:
    return shlex.join(words)


__all__ = [
    "CLAUDE_TOOL_NAMES",
    "COMMAND_TOOLS",
    "OWN_NAMES",
    "PATH_TOOLS",
    "RULE_DECISIONS",
    "AnyCall",
    "CallFacts",
    "CommandPrefix",
    "ExactCommand",
    "Matcher",
    "PathPattern",
    "PermissionRule",
    "RuleDecision",
    "RuleOrigin",
    "Unsupported",
    "command_prefix_text",
    "describe_rule",
    "escape_path",
    "parse_rule",
    "resolve_pattern",
    "rule_text",
]
