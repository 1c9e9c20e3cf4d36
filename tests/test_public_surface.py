"""The top level is the Python API a user needs: every name resolves to its one home, lazily."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import tether


def test_every_public_name_resolves_to_the_object_of_its_home() -> None:
    names = [n for n in tether.__all__ if n != "__version__"]
    assert len(names) == 21
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
    # only the package and the mechanism that imports each name on first use
    assert out.strip() == "['tether', 'tether._lazy_names']"


@pytest.mark.parametrize(
    "package", ["tether.kernel", "tether.session", "tether.session.persistence"]
)
def test_a_layers_package_imports_its_names_on_first_use(package: str) -> None:
    """Importing one small module of a layer (the answering command's path) must not load the
    whole layer: a package's names come from their homes when first asked for."""
    code = f"import sys, {package}; print(sorted(m for m in sys.modules if m.startswith('tether')))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    parents = [".".join(package.split(".")[:i]) for i in range(1, package.count(".") + 2)]
    assert out.strip() == str(sorted([*parents, "tether._lazy_names"]))


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        tether.NoSuchName  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as err:
        assert str(err) == "module 'tether' has no attribute 'NoSuchName'"
    else:
        raise AssertionError("no AttributeError")


SRC = Path(tether.__file__).resolve().parent
PUBLIC_MODULES = {"tether.errors", "tether.subagents.workflow"}
"""Modules besides the packages that a plugin or a user may import (docs/design.md, "Public
surface"); the conformance kit's per-operation spec files are public too."""


def modules() -> list[str]:
    names = []
    for path in sorted(SRC.rglob("*.py")):
        parts = ("tether", *path.relative_to(SRC).with_suffix("").parts)
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_every_implementation_module_is_private() -> None:
    packages = {
        str(p.parent.relative_to(SRC.parent)).replace("/", ".") for p in SRC.rglob("__init__.py")
    }
    public = [
        name
        for name in modules()
        if name not in packages
        and not name.rsplit(".", 1)[1].startswith("_")
        and name not in PUBLIC_MODULES
        and not name.startswith("tether.testing.spec.")
    ]
    assert public == []


def test_every_package_name_resolves() -> None:
    packages = sorted(
        str(p.parent.relative_to(SRC.parent)).replace("/", ".") for p in SRC.rglob("__init__.py")
    )
    for name in packages:
        package = importlib.import_module(name)
        for exported in getattr(package, "__all__", []):
            assert getattr(package, exported, None) is not None, f"{name}.{exported}"
