"""Finding processes by a token in their command line, to prove they died."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path


def processes_with(token: str) -> list[int]:
    """Live (non-zombie) processes whose command line contains ``token``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if token.encode() in cmdline and state != "Z":
            found.append(int(name))
    return found


async def gone(token: str) -> list[int]:
    """The token's processes once they are dead (a killed PID namespace is torn down by the
    kernel asynchronously, so give it a moment), else the survivors."""
    for _ in range(150):
        if not processes_with(token):
            return []
        await asyncio.sleep(0.02)
    return processes_with(token)
