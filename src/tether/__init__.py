"""tether: an agent harness whose subagents act only within the scope fixed at delegation.

The front door is :class:`Harness` (``from tether import Harness``); it is imported lazily so
that ``import tether`` stays cheap for the command line and for plugins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"

if TYPE_CHECKING:
    from tether.harness import Harness, RunResult

__all__ = ["Harness", "RunResult", "__version__"]


def __getattr__(name: str) -> object:
    if name in ("Harness", "RunResult"):
        from tether import harness

        return getattr(harness, name)
    raise AttributeError(f"module 'tether' has no attribute {name!r}")
