"""The grants a person can answer with at a terminal: what ``tether run``'s prompt and ``tether
chat``'s show of a question's :class:`~tether.policy._approval.GrantChoices`, and how a typed
choice becomes an :class:`~tether.policy._approval.Answer`.

A question that offers grants shows them numbered, narrowest first (each rule escaped: a
command in it is the agent's)::

      grant scopes (s or w takes the first; s2, w3 … a wider one):
        1. Bash(npm test --watch)
        2. Bash(npm test:*)
        3. Bash(npm:*)
        4. Bash

``s`` allows for the session and ``w`` always (in this workspace), each with the first scope,
``sN``/``wN`` with the Nth. A question that offers none shows nothing more, and ``s``/``w``
answer nothing there. The approval service checks the answer again (a grant it did not offer
is refused).
"""

from __future__ import annotations

from typing import Final

from tether.kernel._printable import printable
from tether.policy._approval import Answer, ApprovalRequest
from tether.policy._modes import ApprovalOutcome

SESSION_KEY: Final = "s"
ALWAYS_KEY: Final = "w"
WORDS: Final = {
    SESSION_KEY: ApprovalOutcome.ALLOWED_FOR_SESSION,
    "session": ApprovalOutcome.ALLOWED_FOR_SESSION,
    ALWAYS_KEY: ApprovalOutcome.ALLOWED_ALWAYS,
    "always": ApprovalOutcome.ALLOWED_ALWAYS,
}
LABELS: Final = {
    ApprovalOutcome.ALLOWED_FOR_SESSION: f"[{SESSION_KEY}] Allow for this session",
    ApprovalOutcome.ALLOWED_ALWAYS: f"[{ALWAYS_KEY}] Always allow in this workspace",
}


def offered(request: ApprovalRequest) -> tuple[ApprovalOutcome, ...]:
    """The grant outcomes ``request`` offers (none, session, or session and always)."""
    choices = request.choices
    if choices is None:
        return ()
    return tuple(o for o in choices.outcomes() if o in LABELS)


def grant_lines(request: ApprovalRequest) -> list[str]:
    """The numbered scopes of a question that offers grants (nothing otherwise)."""
    choices = request.choices
    if choices is None or not offered(request):
        return []
    lines = ["  grant scopes (s or w takes the first; s2, w3 … a wider one):"]
    lines += [
        f"    {n}. {printable(scope.describe())}" for n, scope in enumerate(choices.scopes, 1)
    ]
    return lines


def grant_labels(request: ApprovalRequest) -> list[str]:
    """``[s] Allow for this session``, ``[w] Always allow in this workspace``, as offered."""
    return [LABELS[outcome] for outcome in offered(request)]


def grant_answer(typed: str, request: ApprovalRequest, by: str | None = None) -> Answer | None:
    """The grant ``typed`` (``s``, ``session``, ``w3``, ...) gives for ``request``, or
    ``None`` when it is none the question offers."""
    word = typed.strip().lower()
    head = word.rstrip("0123456789")
    number = word[len(head) :]
    outcome = WORDS.get(head)
    choices = request.choices
    if outcome is None or outcome not in offered(request) or choices is None:
        return None
    if number and head not in (SESSION_KEY, ALWAYS_KEY):
        return None
    index = int(number) - 1 if number else 0
    if not 0 <= index < len(choices.scopes):
        return None
    return Answer(outcome.value, by, choices.scopes[index])


__all__ = [
    "ALWAYS_KEY",
    "SESSION_KEY",
    "grant_answer",
    "grant_labels",
    "grant_lines",
    "offered",
]
