"""Every store this user's runs have used, so that every run hides all of them.

A run hides the files of the store it uses (:mod:`tether.session._store_files`), but a store
kept elsewhere (``--store sqlite:////ABS/PATH.db``, ``TETHER_STORE`` of another terminal) is
only a file to a run that uses another one: its commands and file tools could read every
session in it and write it, and what they wrote (an ``approval/grant``, a ``sandbox/mode``)
would take effect when the user resumes a session of that store. So the sandbox records each
store it is composed over in a list in tether's data directory (:func:`remember_store`),
which every run hides, and hides every store on that list (:func:`known_store_files`).

Standard library and the store's own naming only: the sandbox reads this list each time it
works out its rules.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from tether._dirs import data_dir
from tether.session._store_files import store_files
from tether.session.persistence._factory import InvalidStoreUrlError, store_location

KNOWN_STORES: Final = "stores"
"""The list's file in the data directory: one store URL per line."""
READ_LIMIT: Final = 1 << 20
"""Bytes of the list that are read (some ten thousand stores)."""


def known_stores_file(env: Mapping[str, str] | None = None) -> Path:
    return data_dir(env) / KNOWN_STORES


def remember_store(url: str, env: Mapping[str, str] | None = None) -> None:
    """Add the store at ``url`` to the list (once). Raises ``OSError`` when the list cannot
    be written: the store is then hidden from this run only."""
    scheme, path = store_location(url)
    if scheme == "sqlite" and path.parent == data_dir(env):
        return  # the data directory is hidden whole
    listed = known_stores_file(env)
    if url in _urls(listed):
        return
    listed.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(
        listed, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
    )
    with os.fdopen(fd, "a") as handle:
        handle.write(url + "\n")  # one write, appended whole


def known_store_files(env: Mapping[str, str] | None = None) -> list[str]:
    """The files of every store on the list (existing or not; a line that names no store is
    skipped)."""
    found: list[str] = []
    for url in _urls(known_stores_file(env)):
        with contextlib.suppress(InvalidStoreUrlError):
            found += [str(p) for p in store_files(url)]
    return found


def _urls(listed: Path) -> list[str]:
    try:
        fd = os.open(listed, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        data = os.read(fd, READ_LIMIT)
    except OSError:
        return []
    finally:
        os.close(fd)
    lines = data.decode("utf-8", "replace").splitlines()
    return list(dict.fromkeys(line for line in lines if "://" in line))


__all__ = ["KNOWN_STORES", "known_store_files", "known_stores_file", "remember_store"]
