"""The child's descriptor, folded from its log: the first ``subagent/descriptor`` in the
child's *own* suffix (after ``seed_length``) is authoritative, so an ancestor's descriptor
inherited through a fork seed is ignored. The payload is defined in ``subagents/_events.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

from tether.session import Event
from tether.subagents._events import Descriptor


def fold_descriptor(events: Sequence[Event], seed_length: int) -> Descriptor | None:
    for event in events[seed_length:]:
        if event.type == Descriptor.TYPE:
            return Descriptor.parse(event.data)
    return None
