"""Package names imported on first use.

A package's ``__init__`` names its public API, and the command line imports a package
whenever it imports any module inside it: ``tether approvals answer`` needs one small module
of the session layer and one of the kernel, not the event loop, pydantic and the backends
that the packages' full APIs bring. So the packages list where each name lives and import it
when it is first asked for (PEP 562); type checkers read the same names from the package's
``TYPE_CHECKING`` imports.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping


def lazy_names(package: str, homes: Mapping[str, str]) -> Callable[[str], object]:
    """The module ``__getattr__`` of ``package``: each name of ``homes`` (name → the module
    that defines it) is imported from its home the first time it is asked for, then kept."""

    def __getattr__(name: str) -> object:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)  # imported once
        return value

    return __getattr__


__all__ = ["lazy_names"]
