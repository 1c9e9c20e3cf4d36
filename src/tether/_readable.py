"""Waiting on the event loop for a file descriptor to become readable, for every layer that
reads a descriptor it does not own a stream for (an inotify instance, a terminal)."""

from __future__ import annotations

import asyncio


async def readable(fd: int) -> None:
    """Return once ``fd`` is readable (or closed at the other end); cancellable, and the
    loop's reader is removed however the wait ends."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        loop.remove_reader(fd)
