"""The top level is the Python API a user needs: every name resolves to its one home, lazily."""

from __future__ import annotations

import subprocess
import sys

import tether


def test_every_public_name_resolves_to_the_object_of_its_home() -> None:
    names = [n for n in tether.__all__ if n != "__version__"]
    assert len(names) == 19
    for name in names:
        value = getattr(tether, name)
        home = tether._HOMES[name]
        module = sys.modules[home]
        assert getattr(module, name) is value, name


def test_import_tether_imports_none_of_them() -> None:
    code = "import sys, tether; print(sorted(m for m in sys.modules if m.startswith('tether')))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "['tether']"


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        tether.NoSuchName  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as err:
        assert str(err) == "module 'tether' has no attribute 'NoSuchName'"
    else:
        raise AssertionError("no AttributeError")
