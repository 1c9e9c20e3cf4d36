"""One home for turning what a user typed into a stored id: a full id, a unique prefix, or
(for sessions) ``last``, the newest root session of a workspace.

Every command that takes a session id (``run``, ``chat``, ``sessions *``) resolves through
here, and ``approvals answer`` through the same prefix rule (:mod:`._unique_match`), so a
prefix means the same thing everywhere.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from tether.kernel._printable import printable
from tether.session._header import SessionHeader
from tether.session.persistence._base import ListsIds, Persistence, SessionNotFoundError
from tether.surfaces.cli._unique_match import unique_match

LAST = "last"
"""``--resume last`` (and ``--continue``): the newest root session of the workspace."""


def newest_root(headers: Iterable[SessionHeader], workspace: str) -> SessionHeader | None:
    """The most recently created top-level session whose workspace is ``workspace``."""
    where = os.path.realpath(workspace)
    roots = [
        h
        for h in headers
        if h.delegation_depth == 0 and h.cwd is not None and os.path.realpath(h.cwd) == where
    ]
    return max(roots, key=lambda h: (h.created_at, h.id), default=None)


async def resolve_session_id(
    persistence: Persistence, wanted: str, *, workspace: str | None = None
) -> str:
    """The stored session ``wanted`` names: its id, a unique prefix, or ``last`` when a
    ``workspace`` is given. Raises :class:`SessionNotFoundError` when nothing matches."""
    # Ids without parsing headers where the backend can: one unreadable header must not stop
    # ``sessions fsck ID`` (or any other command) from naming a session by its prefix.
    ids = (
        await persistence.list_ids()
        if isinstance(persistence, ListsIds)
        else [h.id for h in await persistence.list()]
    )
    if wanted == LAST and workspace is not None and LAST not in ids:
        newest = newest_root(await persistence.list(), workspace)
        if newest is None:
            raise SessionNotFoundError(
                f"no session of workspace {printable(os.path.realpath(workspace))} is stored "
                "(start one with tether run PROMPT)"
            )
        return newest.id
    found = unique_match("session", wanted, ids)
    if found is None:
        # The backends' own text: a prefix that matches nothing reads like a mistyped id.
        raise SessionNotFoundError(f"session {wanted!r} not found")
    return found
