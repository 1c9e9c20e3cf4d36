"""Errors with stable codes.

Every error tether raises on purpose carries a ``code`` that scripts and tests can match on,
and a message a user can act on. Codes never change meaning once published.

Each code is defined in exactly one place: the ``code`` attribute of its own subclass, or, for
an error raised with one of several codes, a member of the ``Literal`` type of that class's
``code`` parameter (``ModelErrorCode``, say), which mypy holds every raise to. ``docs/errors.md``
lists every code with what it means and what to do, and ``tests/test_error_catalog.py`` keeps
the two in step.
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
