"""The prompt of ``tether run``: from the argument or stdin, and never empty.

A prompt of nothing but whitespace (``tether run </dev/null``, an empty argument) is refused
before anything is opened: sent to a model it would cost a request and start a turn the user
never asked for.
"""

from __future__ import annotations

import sys

from tether.errors import TetherError


class EmptyPromptError(TetherError):
    """``tether run`` was given a prompt with no text."""

    code = "EMPTY_PROMPT"


def read_prompt(prompt: str | None) -> str:
    """``prompt``, else stdin (the caller has checked stdin is not a terminal); refused when it
    is empty or only whitespace."""
    source = "the PROMPT argument"
    if prompt is None:
        prompt = sys.stdin.read()
        source = "stdin"
    if not prompt.strip():
        raise EmptyPromptError(
            f"the prompt from {source} is empty; give the task as PROMPT or pipe it on stdin"
        )
    return prompt
