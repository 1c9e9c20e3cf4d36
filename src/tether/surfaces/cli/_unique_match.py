"""The prefix rule: what a typed id or prefix names among known ids (sessions, approvals).

Kept apart from the stores (:mod:`._id_prefix` resolves session ids through it) so that
``tether approvals answer`` can apply it to the answer box's index without loading them.
"""

from __future__ import annotations

from collections.abc import Iterable

from tether.errors import TetherError
from tether.kernel._printable import printable

SHOWN_CANDIDATES = 10
"""How many matching ids an ambiguous-prefix error names before it says how many more."""


class AmbiguousIdError(TetherError):
    """A prefix matches more than one stored id."""

    code = "AMBIGUOUS_ID"


def unique_match(kind: str, wanted: str, ids: Iterable[str]) -> str | None:
    """The one id equal to ``wanted`` or starting with it; ``None`` when none does.

    Raises :class:`AmbiguousIdError` naming the candidates when several start with it.
    """
    known = sorted(set(ids))
    if wanted in known:
        return wanted
    if not wanted:
        return None
    matches = [i for i in known if i.startswith(wanted)]
    if len(matches) > 1:
        shown = ", ".join(matches[:SHOWN_CANDIDATES])
        more = len(matches) - SHOWN_CANDIDATES
        tail = f" and {more} more" if more > 0 else ""
        raise AmbiguousIdError(
            f"{kind} id prefix {printable(wanted)!r} matches {len(matches)} {kind}s: "
            f"{shown}{tail}; give more of the id"
        )
    return matches[0] if matches else None


__all__ = ["SHOWN_CANDIDATES", "AmbiguousIdError", "unique_match"]
