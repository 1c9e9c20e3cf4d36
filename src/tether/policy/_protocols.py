"""What the policy layer needs of an agent, without importing the agent layer (which sits above).

An agent is anything with a ``session`` (:class:`~tether.session.HasSession`, defined with the
session so the kernel's prompt parts can name it too). An agent that can ``inject`` receives
user-visible notices (the approval-policy change notice) for its next step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from tether.session import HasSession, JsonValue


@runtime_checkable
class CanInject(HasSession, Protocol):
    """An agent with an inbox: ``inject`` queues model-facing text for the next pre-step
    without waking the agent (``agent/_inbox.py``)."""

    def inject(self, text: str, *, source: Mapping[str, JsonValue]) -> object: ...


__all__ = ["CanInject", "HasSession"]
