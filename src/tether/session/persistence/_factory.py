"""Open a persistence backend from a store URL.

Accepted forms (the ``--store`` flag and ``TETHER_STORE``):

- ``sqlite:////ABS/PATH.db`` or ``sqlite:///REL/PATH.db``: :class:`SqlitePersistence` on
  that file (the default). As in SQLAlchemy, the three slashes end the (empty) authority and
  what follows is the path: a fourth slash makes it absolute, without one it is relative to
  the current directory (resolved when the URL is opened, so a later ``chdir`` or sandbox does
  not move the store);
- ``jsonl:///ABS/DIR``: :class:`JsonlPersistence` rooted at that directory (absolute only);
- ``memory://``: a new, empty :class:`MemoryPersistence`, which keeps sessions in the memory
  of this process only. It has no location: what needs one (another process answering an
  approval or reading the sessions, leases) refuses it with :class:`StoreInMemoryError`.

Percent-escapes in paths are decoded.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final
from urllib.parse import quote, unquote

from tether._dirs import data_dir
from tether.errors import TetherError

if TYPE_CHECKING:
    from tether.session.persistence._base import Persistence

MEMORY_URL: Final = "memory://"
STORE_URL_FORMS: Final = (
    "sqlite:////ABS/PATH.db",
    "sqlite:///REL/PATH.db",
    "jsonl:///ABS/DIR",
    MEMORY_URL,
)
STORE_ENV: Final = "TETHER_STORE"


class InvalidStoreUrlError(TetherError):
    """A store URL is not one of :data:`STORE_URL_FORMS`."""

    code = "INVALID_STORE_URL"


class StoreInMemoryError(TetherError):
    """Something that reaches the store from outside the process running it (another
    process, a lease, an answer box beside the store) was asked of ``memory://``."""

    code = "STORE_IN_MEMORY"


def open_persistence(url: str) -> Persistence:
    """The backend ``url`` names. Nothing is opened or created until its first call."""
    # The backends (and the event loop they run on) are loaded only to open one: reading a
    # URL (``store_location``, the answering command's whole use of this module) needs neither.
    from tether.session.persistence._jsonl import JsonlPersistence
    from tether.session.persistence._memory import MemoryPersistence
    from tether.session.persistence._sqlite import SqlitePersistence

    scheme, _, rest = url.partition("://")
    if scheme == "memory":
        if rest:
            raise _invalid(url, "memory:// takes no path (each one is a new, empty store)")
        return MemoryPersistence()
    if scheme == "sqlite":
        return SqlitePersistence(_sqlite_path(url, rest))
    if scheme == "jsonl":
        return JsonlPersistence(_absolute_path(url, rest))
    raise _invalid(url, f"unknown scheme {scheme!r}" if rest else "not a URL")


def store_location(url: str) -> tuple[str, Path]:
    """The scheme and absolute path a store URL names (``sqlite`` file or ``jsonl`` dir);
    :class:`StoreInMemoryError` for ``memory://``, which has none."""
    scheme, _, rest = url.partition("://")
    if scheme == "memory":
        raise StoreInMemoryError(
            f"the {url} store keeps sessions in the memory of the process that runs them, so "
            "no other process can read, answer or lease them; use a sqlite:// or jsonl:// "
            "store for this"
        )
    if scheme not in ("sqlite", "jsonl"):
        raise _invalid(url, f"unknown scheme {scheme!r}" if rest else "not a URL")
    return scheme, Path(
        _sqlite_path(url, rest) if scheme == "sqlite" else _absolute_path(url, rest)
    )


def sqlite_url(path: str | os.PathLike[str]) -> str:
    """The store URL of the SQLite file at ``path`` (made absolute)."""
    return "sqlite:///" + quote(os.path.abspath(path))


def default_store_url(env: Mapping[str, str] | None = None) -> str:
    """``TETHER_STORE`` if set, else SQLite in the user data directory.

    The data directory is :func:`tether._dirs.data_dir`; it is created so the default store
    can open.
    """
    env = os.environ if env is None else env
    configured = env.get(STORE_ENV, "").strip()
    if configured:
        return configured
    directory = data_dir(env)
    directory.mkdir(parents=True, exist_ok=True)
    return sqlite_url(directory / "tether.db")


def _sqlite_path(url: str, rest: str) -> str:
    """SQLAlchemy's rule: ``sqlite:///`` then the path, absolute with a leading slash."""
    if "?" in rest or "#" in rest:
        raise _invalid(url, "query strings and fragments are not supported")
    if not rest.startswith("/"):
        raise _invalid(url, "three slashes must follow the scheme (four for an absolute path)")
    path = unquote(rest[1:])
    if path.rstrip("/") == "":
        raise _invalid(url, "the path is empty")
    return os.path.abspath(path)


def _absolute_path(url: str, rest: str) -> str:
    if "?" in rest or "#" in rest:
        raise _invalid(url, "query strings and fragments are not supported")
    if not rest.startswith("/"):
        raise _invalid(url, "the path must be absolute (three slashes after the scheme)")
    path = unquote(rest)
    if path.rstrip("/") == "":
        raise _invalid(url, "the path is empty")
    return path


def _invalid(url: str, problem: str) -> InvalidStoreUrlError:
    return InvalidStoreUrlError(
        f"invalid store URL {url!r}: {problem}; expected one of {', '.join(STORE_URL_FORMS)}"
    )


__all__ = [
    "MEMORY_URL",
    "STORE_ENV",
    "STORE_URL_FORMS",
    "InvalidStoreUrlError",
    "StoreInMemoryError",
    "default_store_url",
    "open_persistence",
    "sqlite_url",
]
