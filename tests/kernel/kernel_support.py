"""Stand-ins the kernel tests share (no tests here)."""

from __future__ import annotations


class Agent:
    """Stands in for an agent: scopes are compared by identity."""

    def __init__(self, name: str) -> None:
        self.name = name
