"""Errors with stable codes.

Every error tether raises on purpose carries a ``code`` that scripts and tests can match on,
and a message a user can act on. Codes never change meaning once published.
"""

from __future__ import annotations


class TetherError(Exception):
    """Base class: ``code`` is stable, ``str(err)`` is for humans."""

    code: str = "TETHER_ERROR"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"{self.args[0]}" if self.args else self.code
