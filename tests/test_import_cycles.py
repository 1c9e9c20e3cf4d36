"""No two modules of ``src/tether`` import each other, directly or round a longer circle.

Every import counts, lazy ones inside functions and ``TYPE_CHECKING`` ones too: a circle that
only works because one side imports late is still a circle a reader has to untangle.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(tree: ast.AST, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that ``tree`` imports (``from pkg import mod`` names the
    module, ``from pkg import name`` the package)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in modules else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found & modules


def import_graph() -> dict[str, set[str]]:
    paths = {module_name(path): path for path in SRC.rglob("*.py")}
    modules = set(paths)
    return {
        name: imports_of(ast.parse(path.read_text()), modules) - {name}
        for name, path in paths.items()
    }


def test_the_import_graph_has_no_cycle() -> None:
    graph = import_graph()
    assert "tether.tools._jobs" in graph["tether.tools._bash"]  # the graph does see imports
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as err:
        pytest.fail(f"import cycle: {' -> '.join(err.args[1])}")


def test_lazy_and_type_checking_imports_count() -> None:
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from tether.tools._jobs import JobManager\n"
        "def apply():\n"
        "    from tether.tools import _bash\n"
        "    import tether.kernel\n"
    )
    modules = {"tether.tools", "tether.tools._jobs", "tether.tools._bash", "tether.kernel"}
    assert imports_of(tree, modules) == {
        "tether.tools._jobs",
        "tether.tools._bash",
        "tether.kernel",
    }
