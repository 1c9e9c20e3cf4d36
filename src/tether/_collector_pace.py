"""The cyclic garbage collector's pace while a harness is open (decision 0059).

CPython collects its youngest generation every 700 net allocations of container objects, and
the whole heap once the survivors reach a quarter of it. A harness allocates a few hundred
such objects per step (events, frames, futures), and while a thousand children are resident
most of them survive a young collection only because their task has not had its turn yet: at
the default pace the collector took 0.3-0.45 ms per step at 1,000 children (a third of the
event loop's time), almost all of it full collections that free nothing. Collecting the young
generation every :data:`YOUNG_THRESHOLD` allocations instead makes every collection ten times
rarer, and the full ones rarer still.

The pace is the process's, so it is changed only where nobody chose one: while at least one
harness is open and the thresholds are CPython's defaults; the last harness to close puts the
defaults back, unless the process changed them meanwhile. ``gc.freeze`` was the other option:
it spares a full collection the objects that exist when it is called (imports, the composed
kernel), a quarter of the cost here, but what fills the heap at that scale is made later, and
frozen objects are never freed.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

DEFAULT_THRESHOLDS: Final = (700, 10, 10)
"""CPython's own thresholds (``gc.get_threshold()`` of a process that set none)."""

YOUNG_THRESHOLD: Final = 7_000
"""Net allocations of container objects between two young collections, while a harness is
open."""

_lock = threading.Lock()
_open = 0
_paced: tuple[int, int, int] | None = None
"""The thresholds this module set, while it holds them (``None``: it set none)."""


@contextmanager
def collector_paced() -> Iterator[None]:
    """While the block runs (a harness is open): the young generation collected every
    :data:`YOUNG_THRESHOLD` allocations, if the process kept CPython's default pace."""
    global _open, _paced
    with _lock:
        _open += 1
        if _open == 1 and gc.get_threshold() == DEFAULT_THRESHOLDS:
            _paced = (YOUNG_THRESHOLD, *DEFAULT_THRESHOLDS[1:])
            gc.set_threshold(*_paced)
    try:
        yield
    finally:
        with _lock:
            _open -= 1
            if _open == 0 and _paced is not None:
                if gc.get_threshold() == _paced:  # else the process chose its own meanwhile
                    gc.set_threshold(*DEFAULT_THRESHOLDS)
                _paced = None


__all__ = ["DEFAULT_THRESHOLDS", "YOUNG_THRESHOLD", "collector_paced"]
