"""The specs, one module per capability: the six operations, then the optional claims."""

from __future__ import annotations

from typing import Final

from tether.testing._checks import Spec
from tether.testing.spec import (
    append,
    close,
    corrupt_record,
    corrupt_tail,
    create,
    defers_sync,
    inspect,
    list,
    list_ids,
    load,
    reopen,
    set_format_version,
    storage_snapshot,
)

SPECS: Final[tuple[Spec, ...]] = (
    create.spec,
    append.spec,
    load.spec,
    inspect.spec,
    list.spec,
    close.spec,
    reopen.spec,
    list_ids.spec,
    defers_sync.spec,
    corrupt_tail.spec,
    corrupt_record.spec,
    set_format_version.spec,
    storage_snapshot.spec,
)
"""Every spec, in the order the report lists them."""

__all__ = ["SPECS"]
