"""How the keys a person types at an approval question become its answer, grants included: the
one reading of keys for ``tether run``'s prompt and ``tether chat``'s.

A question that offers grants shows the scopes they may cover under it, numbered, narrowest
first (each rule escaped: a command in it is the agent's)::

      grant scopes (s or w, then the scope's number):
        1. Bash(npm test --watch)
        2. Bash(npm test:*)
        3. Bash(npm:*)
        4. Bash

Each choice is one key (:data:`~tether.surfaces.cli._approval_prompt.CHOICES`): ``a`` allows
once, ``r`` or Enter rejects. ``s`` (allow for this session) and ``w`` (always allow in this
workspace) ask for the scope with a second key, as a numbered menu does: its number, or Enter
for the first (the narrowest); Escape goes back to the choices. Where only one scope is
offered, ``s`` and ``w`` grant it at once. A question that offers no grant shows neither, and
their keys answer nothing there. The approval service checks the answer again (a grant it did
not offer is refused).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from tether.kernel._printable import printable
from tether.policy._approval import Answer, ApprovalRequest
from tether.policy._events import GrantScope
from tether.policy._modes import GRANTING
from tether.surfaces.cli._approval_prompt import (
    ENTER,
    Choice,
    choice_for,
    choices_text,
    offered_choices,
)

ESCAPE: Final = "\x1b"
"""The Escape key, as a terminal sends it alone."""
SCOPE_DIGITS: Final = "123456789"
"""The keys that pick a scope by its number."""


def said(outcome: str, scope: GrantScope | None) -> str:
    """``allowed-once``; ``allowed-for-session: Bash(npm test:*)`` for a grant."""
    return f"{outcome}: {printable(scope.describe())}" if scope is not None else outcome


def granted_scope(request: ApprovalRequest, outcome: str) -> GrantScope | None:
    """The scope an answer that names none grants (the narrowest offered); ``None`` for an
    outcome that grants nothing."""
    choices = request.choices
    return choices.pick(None) if choices is not None and outcome in GRANTING else None


def grant_lines(request: ApprovalRequest) -> list[str]:
    """The scopes a grant may cover, numbered when there are several (nothing for a question
    that offers no grant)."""
    keys = [choice.key for choice in offered_choices(request) if choice.grants]
    choices = request.choices
    if not keys or choices is None:
        return []
    grant_keys = " or ".join(keys)
    if len(choices.scopes) == 1:
        return [f"  grant scope ({grant_keys}):", f"    {printable(choices.scopes[0].describe())}"]
    return [
        f"  grant scopes ({grant_keys}, then the scope's number):",
        *(f"    {n}. {printable(scope.describe())}" for n, scope in enumerate(choices.scopes, 1)),
    ]


@dataclass(frozen=True, slots=True)
class Chosen:
    """An answer given with keys: the choice, the scope of a grant, and the key that gave it
    (a choice's letter, or a scope's number)."""

    choice: Choice
    scope: GrantScope | None = None
    key: str = ""

    def answer(self, by: str) -> Answer:
        return Answer(self.choice.outcome.value, by, self.scope)

    def said(self) -> str:
        return said(self.choice.outcome.value, self.scope)


class AnswerKeys:
    """The keys typed at one open question, read into its answer (module docstring)."""

    def __init__(self, request: ApprovalRequest) -> None:
        self.choices = offered_choices(request)
        self.scopes: tuple[GrantScope, ...] = (
            request.choices.scopes if request.choices is not None else ()
        )
        self.picking: Choice | None = None
        """The grant whose scope the next key picks, if any."""

    def prompt(self) -> str:
        """What the question asks for now: the choices, or a grant's scope."""
        picking = self.picking
        if picking is None:
            return choices_text(self.choices)
        return f"{picking.label}: scope 1-{len(self.scopes)} (Enter: 1, Esc: back)"

    def press(self, key: str) -> Chosen | None:
        """The answer ``key`` completes, or ``None`` (it answers nothing, or a grant now waits
        for its scope: :attr:`picking`)."""
        picking = self.picking
        if picking is not None:
            return self._pick(picking, key)
        choice = choice_for(key, self.choices)
        if choice is None:
            return None
        if not choice.grants:
            return Chosen(choice, key=choice.key)
        if len(self.scopes) == 1:
            return Chosen(choice, self.scopes[0], choice.key)
        self.picking = choice
        return None

    def _pick(self, picking: Choice, key: str) -> Chosen | None:
        if key == ESCAPE:
            self.picking = None
            return None
        if key in ENTER:
            number = 1
        elif len(key) == 1 and key in SCOPE_DIGITS and int(key) <= len(self.scopes):
            number = int(key)
        else:
            return None
        return Chosen(picking, self.scopes[number - 1], str(number))


__all__ = ["ESCAPE", "SCOPE_DIGITS", "AnswerKeys", "Chosen", "grant_lines", "granted_scope", "said"]
