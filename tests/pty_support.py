"""Reading what a program under a real pseudo-terminal wrote (no tests here)."""

from __future__ import annotations

import os
import select
import time


def read_until(fd: int, needle: bytes, seen: bytes = b"", timeout: float = 60) -> bytes:
    """``seen`` plus what ``fd`` yields until ``needle`` is in it (or the terminal closes);
    fails naming what arrived when ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while needle not in seen:
        if time.monotonic() > deadline:
            raise AssertionError(f"never saw {needle!r}; got {seen!r}")
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    return seen
