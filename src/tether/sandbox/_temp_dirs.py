"""The private temporary directories of Landlock commands: made ahead, removed behind.

Under workspace-write a Landlock command gets a directory of its own as ``$TMPDIR``
(bubblewrap gives its commands a private ``/tmp`` instead). Making one and removing it are
each a change to the directory that holds them (``/tmp``), which waits for the filesystem's
journal: about 0.1 ms on a quiet disk, milliseconds on a busy one, on every command. So each
harness process has one :class:`TempDirs`, :data:`temp_dirs`: a command takes a directory
made ahead of time (:meth:`TempDirs.take`; it makes one itself only when none is ready), and
its ``close`` hands it back (:meth:`TempDirs.release`). One worker thread owned by the pool
removes released directories and makes the next ones, between commands.

A directory is made with ``mkdtemp`` (mode 0700, a fresh random name) and handed out once. A
process forked from the harness starts with an empty pool of its own (the directories made
ahead are its parent's); at exit the worker finishes its removals and removes the directories
nobody took.
"""

from __future__ import annotations

import atexit
import collections
import os
import shutil
import tempfile
import threading
import time
from typing import Final

PREFIX: Final = "tether-sbx-"
SPARE: Final = 2
"""Directories kept made ahead: a command takes one, and the pair prepared for the next
command one (:mod:`._prepared`)."""
PAUSE: Final = 0.02
"""Seconds the worker waits before each step it is woken for: a command takes its
directory just before it starts, and releases it just before its result is recorded; the
worker's filesystem calls must not compete with either."""


class TempDirs:
    """Private temporary directories, made ahead and removed behind by one worker thread."""

    def __init__(self, *, prefix: str = PREFIX, spare: int = SPARE) -> None:
        self.prefix = prefix
        self.spare = spare
        self._reset()

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._ready: collections.deque[str] = collections.deque()
        self._released: collections.deque[str] = collections.deque()
        self._busy = False
        """The worker is removing or making one (outside the lock)."""
        self._stopping = False
        self._failed = False
        """Making one failed (a full disk, say): not again until the next take or release."""
        self._worker: threading.Thread | None = None

    def forget(self) -> None:
        """In a process forked from the harness: the directories are its parent's (neither
        handed out nor removed here), and so is the worker (not running here)."""
        self._reset()

    def take(self) -> str:
        """A new, empty directory (its real path) for one command, which must
        :meth:`release` it. Made ahead when possible (the next ones are made after a release:
        the worker is not woken while a command starts)."""
        with self._lock:
            path = self._ready.popleft() if self._ready else None
        return path if path is not None else self._make()

    def give_back(self, path: str) -> None:
        """``path`` (from :meth:`take`) was never handed to a command: keep it for the next
        (removing it and making another would be two changes to its directory for nothing)."""
        with self._lock:
            self._ready.append(path)

    def release(self, path: str) -> None:
        """``path`` (from :meth:`take`) is no longer used: remove it, in the background."""
        with self._lock:
            self._released.append(path)
            self._wake()

    def drain(self) -> None:
        """Wait until the worker is idle: every released directory removed, the next ones
        made."""
        with self._changed:
            while (self._busy or not self._idle()) and self._alive():
                self._changed.wait()
        self._remove_released()  # no worker (stopped, or never started): here and now

    def close(self) -> None:
        """Stop the worker after its current step; remove what was released and what was
        made ahead. (At exit; the pool can be used again after, with a new worker.)"""
        with self._lock:
            self._stopping = True
            worker, self._worker = self._worker, None
            self._changed.notify_all()
        if worker is not None:
            worker.join()
        with self._lock:
            self._stopping = False
            spares = list(self._ready)
            self._ready.clear()
        self._remove_released()
        for path in spares:
            shutil.rmtree(path, ignore_errors=True)

    # -- the worker ----------------------------------------------------------------------------
    def _alive(self) -> bool:
        return self._worker is not None and self._worker.is_alive()

    def _wake(self) -> None:
        """(Lock held.) Start the worker, or tell it there is work."""
        self._failed = False
        if not self._alive():
            self._worker = threading.Thread(target=self._run, name="tether-temp-dirs", daemon=True)
            self._worker.start()
        self._changed.notify_all()

    def _idle(self) -> bool:
        """(Lock held.) Nothing to do."""
        refill = len(self._ready) < self.spare and not self._failed
        return not (self._stopping or self._released or refill)

    def _run(self) -> None:
        while True:
            with self._changed:
                while self._idle():
                    self._changed.wait()
            time.sleep(PAUSE)  # once woken; then everything there is to do, in a row
            while True:
                with self._changed:
                    if self._stopping:
                        return
                    if self._idle():
                        break
                    path = self._released.popleft() if self._released else None
                    self._busy = True
                try:
                    if path is not None:
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        made = self._make()
                        with self._lock:
                            self._ready.append(made)
                except OSError:
                    with self._lock:
                        self._failed = True  # the next take makes its own, and says why
                finally:
                    with self._changed:
                        self._busy = False
                        self._changed.notify_all()

    def _make(self) -> str:
        return os.path.realpath(tempfile.mkdtemp(prefix=self.prefix))

    def _remove_released(self) -> None:
        while True:
            with self._lock:
                if not self._released:
                    return
                path = self._released.popleft()
            shutil.rmtree(path, ignore_errors=True)


temp_dirs: Final = TempDirs()
"""This process's pool."""
atexit.register(temp_dirs.close)
os.register_at_fork(after_in_child=temp_dirs.forget)

__all__ = ["PREFIX", "SPARE", "TempDirs", "temp_dirs"]
