"""``tether approvals answer ID allow|allow-session|allow-always|reject [--store URL]``:
answering a waiting approval, fast.

It is typed in another terminal while an agent waits, so it starts with as little as it can:
the answer box's index (:mod:`tether.session._answer_box`), the approval socket and the prefix
rule, without the command-line framework, the event loop, the stores or the harness. The
entry point (:func:`tether.surfaces.cli._app.main`) offers it the command line first; anything
that is not exactly this command (help, another option, a wrong count of arguments) and an id
under which nothing waits go the usual way (:mod:`._approvals`), which gives help and usage
errors, and reads the store to say why nothing waits.
"""

from __future__ import annotations

from typing import Final

from tether.errors import TetherError
from tether.kernel._printable import printable
from tether.session._answer_box import AnswerBox
from tether.session._answer_channel import ANSWER_WORDS, CLI_SURFACE
from tether.surfaces.cli._basics import error_line, store_url, write_text
from tether.surfaces.cli._unique_match import unique_match

WORDS: Final = ANSWER_WORDS
"""The decisions the command takes, and the outcome each gives (``allow-session`` and
``allow-always`` grant the narrowest scope the question offers)."""
STORE: Final = "--store"


def answer_waiting(approval_id: str, outcome: str, store: str | None) -> bool:
    """Hand ``outcome`` to the surface waiting under ``approval_id`` (or a unique prefix of a
    waiting id) in the answer box of ``store``, and print what it recorded; ``False``, with
    nothing printed, when nothing waits under it."""
    box = AnswerBox.for_store(store_url(store))
    found = unique_match("approval", approval_id, box.waiting_ids())
    if found is None:
        return False
    delivered = box.deliver(found, outcome, CLI_SURFACE)
    asked = delivered.asked
    about = (
        f"{printable(asked.tool_name)} in session {printable(asked.session_id)}; "
        if asked is not None
        else ""
    )
    write_text(
        f"{printable(found)}: {outcome} ({about}recorded as answered by "
        f"{printable(delivered.answered_by)})\n"
    )
    return True


def parse(argv: list[str]) -> tuple[str, str, str | None] | None:
    """``(id, decision, store)`` of exactly ``approvals answer ID DECISION [--store URL]``
    (the option anywhere after ``answer``, ``--store=URL`` too); ``None`` for anything else."""
    if argv[:2] != ["approvals", "answer"]:
        return None
    words: list[str] = []
    store: str | None = None
    rest = iter(argv[2:])
    for arg in rest:
        if arg == STORE:
            store = next(rest, None)
            if store is None:
                return None
        elif arg.startswith(STORE + "="):
            store = arg.removeprefix(STORE + "=")
        elif arg.startswith("-"):
            return None
        else:
            words.append(arg)
    if len(words) != 2 or words[1] not in WORDS:
        return None
    return words[0], words[1], store


def answer_from_command_line(argv: list[str]) -> int | None:
    """The exit status of ``tether`` when ``argv`` answers an approval that waits; ``None``
    when the usual command line must handle it."""
    parsed = parse(argv)
    if parsed is None:
        return None
    approval_id, decision, store = parsed
    try:
        answered = answer_waiting(approval_id, WORDS[decision], store)
    except TetherError as err:
        error_line(f"{err.code}: {err}")
        return 1
    return 0 if answered else None


__all__ = ["WORDS", "answer_from_command_line", "answer_waiting", "parse"]
