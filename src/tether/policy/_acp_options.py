"""Approval outcomes in the Agent Client Protocol's words: the one typed mapping between
tether's answers and ACP's permission options (``session/request_permission``), for an ACP
surface to offer a question and read its answer.

ACP offers a list of options, each ``{optionId, name, kind}`` with ``kind`` one of
``allow_once``, ``allow_always``, ``reject_once``, ``reject_always``; the client answers with
the ``optionId`` it selected, or ``cancelled``. :func:`acp_options` lays a question's choices
out so: ``Allow once``; one ``allow_always`` option per offered scope for the session, and
(when the question offers it) per scope always; ``Reject``. :func:`answer_of_option` reads the
selection back as the :class:`~tether.policy._approval.Answer` the approval service checks like
any other (an id that was not offered is ``None``: the ask is ``unavailable``).

Kind by kind (:data:`OUTCOME_OF_KIND`, :data:`KIND_OF_OUTCOME`): ``allow_once`` is
``allowed-once``; ``allow_always`` is a grant, for the session by default (ACP clients show
"Always allow" for what a harness remembers; which scope, and whether it outlives the session,
is the option's); ``reject_once`` and ``reject_always`` are both ``rejected``: an answer never
records a standing refusal in tether (a ``deny`` rule does).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal, TypeAlias

from tether.policy._approval import Answer, GrantChoices
from tether.policy._events import GrantScope
from tether.policy._modes import ApprovalOutcome

AcpOptionKind: TypeAlias = Literal["allow_once", "allow_always", "reject_once", "reject_always"]

OUTCOME_OF_KIND: Final[Mapping[AcpOptionKind, ApprovalOutcome]] = MappingProxyType(
    {
        "allow_once": ApprovalOutcome.ALLOWED_ONCE,
        "allow_always": ApprovalOutcome.ALLOWED_FOR_SESSION,
        "reject_once": ApprovalOutcome.REJECTED,
        "reject_always": ApprovalOutcome.REJECTED,
    }
)
"""What an option of each kind answers when nothing more is known of it."""

KIND_OF_OUTCOME: Final[Mapping[ApprovalOutcome, AcpOptionKind]] = MappingProxyType(
    {
        ApprovalOutcome.ALLOWED_ONCE: "allow_once",
        ApprovalOutcome.ALLOWED_FOR_SESSION: "allow_always",
        ApprovalOutcome.ALLOWED_ALWAYS: "allow_always",
        ApprovalOutcome.REJECTED: "reject_once",
    }
)
"""The kind of the option that gives each outcome an answerer can give."""


@dataclass(frozen=True, slots=True)
class AcpOption:
    """One ACP permission option and the answer selecting it gives."""

    option_id: str
    name: str
    kind: AcpOptionKind
    outcome: ApprovalOutcome
    scope: GrantScope | None = None

    def to_acp(self) -> dict[str, str]:
        """``{"optionId", "name", "kind"}``, as ACP's ``PermissionOption``."""
        return {"optionId": self.option_id, "name": self.name, "kind": self.kind}


def _option(
    outcome: ApprovalOutcome, option_id: str, name: str, scope: GrantScope | None = None
) -> AcpOption:
    return AcpOption(option_id, name, KIND_OF_OUTCOME[outcome], outcome, scope)


def acp_options(choices: GrantChoices | None) -> tuple[AcpOption, ...]:
    """The options a question with ``choices`` offers, in the order to show them."""
    options = [_option(ApprovalOutcome.ALLOWED_ONCE, "allowed-once", "Allow once")]
    if choices is not None:
        for index, scope in enumerate(choices.scopes, 1):
            options.append(
                _option(
                    ApprovalOutcome.ALLOWED_FOR_SESSION,
                    f"allowed-for-session:{index}",
                    f"Allow {scope.describe()} for this session",
                    scope,
                )
            )
        if ApprovalOutcome.ALLOWED_ALWAYS in choices.outcomes():
            for index, scope in enumerate(choices.scopes, 1):
                options.append(
                    _option(
                        ApprovalOutcome.ALLOWED_ALWAYS,
                        f"allowed-always:{index}",
                        f"Always allow {scope.describe()} in this workspace",
                        scope,
                    )
                )
    options.append(_option(ApprovalOutcome.REJECTED, "rejected", "Reject"))
    return tuple(options)


AcpSelection: TypeAlias = str | Literal[ApprovalOutcome.CANCELLED]
"""What an ACP client answered: the ``optionId`` it selected, or that it cancelled."""


def answer_of_option(
    options: tuple[AcpOption, ...], selected: AcpSelection, by: str | None = None
) -> Answer | None:
    """The answer ``selected`` gives among ``options`` (``None``: an id that was not one of
    them, which the caller treats as ``unavailable``)."""
    if selected is ApprovalOutcome.CANCELLED:
        return Answer(ApprovalOutcome.CANCELLED.value, by)
    for option in options:
        if option.option_id == selected:
            return Answer(option.outcome.value, by, option.scope)
    return None


__all__ = [
    "KIND_OF_OUTCOME",
    "OUTCOME_OF_KIND",
    "AcpOption",
    "AcpOptionKind",
    "AcpSelection",
    "acp_options",
    "answer_of_option",
]
