"""``docs/errors.md`` lists exactly the stable error codes that ``src/`` defines, each once.

A code is defined by the ``code`` attribute of a ``TetherError`` subclass, or as a member of
the ``Literal`` type of a subclass's ``code`` parameter (an error raised with one of several
codes). Raises that pass ``code="..."`` must name a defined code.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import types
import typing
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import tether
from tether.errors import TetherError

ROOT = Path(__file__).resolve().parents[1]
CATALOG = ROOT / "docs" / "errors.md"
ROW = re.compile(r"^\| `([A-Z][A-Z0-9_]*)` \|")


def error_classes() -> list[type[TetherError]]:
    """``TetherError`` and every subclass defined in tether's own modules (all imported)."""
    for module in pkgutil.walk_packages(tether.__path__, "tether."):
        importlib.import_module(module.name)
    found: list[type[TetherError]] = [TetherError]
    pending = [TetherError]
    while pending:
        for sub in pending.pop().__subclasses__():
            if sub.__module__.startswith("tether.") and sub not in found:
                found.append(sub)
                pending.append(sub)
    return found


def literal_members(annotation: object) -> Iterator[str]:
    """The strings of every ``Literal`` in ``annotation`` (through unions and ``Optional``)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        yield from (arg for arg in typing.get_args(annotation) if isinstance(arg, str))
    elif origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            yield from literal_members(arg)


def definitions(classes: list[type[TetherError]]) -> dict[str, list[str]]:
    """Each code, with every place that defines it."""
    sites: dict[str, list[str]] = defaultdict(list)
    for cls in classes:
        name = f"{cls.__module__}.{cls.__qualname__}"
        own = cls.__dict__
        if isinstance(own.get("code"), str):
            sites[own["code"]].append(f"{name}.code")
        if "__init__" in own:
            hint = typing.get_type_hints(own["__init__"]).get("code")
            for code in literal_members(hint):
                sites[code].append(f"{name}.__init__(code=...)")
    return dict(sites)


def passed_codes(source: str, raisers: set[str]) -> Iterator[tuple[int, str]]:
    """``(line, code)`` for every ``code="..."`` passed to a call of one of ``raisers``."""
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if called not in raisers:
            continue
        for keyword in node.keywords:
            if keyword.arg == "code" and isinstance(keyword.value, ast.Constant):
                yield node.lineno, str(keyword.value.value)


def catalogued(text: str) -> list[str]:
    return [match.group(1) for line in text.splitlines() if (match := ROW.match(line))]


def test_every_code_has_exactly_one_definition() -> None:
    sites = definitions(error_classes())
    twice = {code: where for code, where in sites.items() if len(where) > 1}
    assert twice == {}


def test_every_code_passed_to_an_error_is_defined() -> None:
    classes = error_classes()
    defined = definitions(classes)
    raisers = {cls.__name__ for cls in classes}
    undefined = [
        f"{path.relative_to(ROOT)}:{line}: {code}"
        for path in sorted((ROOT / "src").rglob("*.py"))
        for line, code in passed_codes(path.read_text(), raisers)
        if code not in defined
    ]
    assert undefined == []


def test_the_catalog_lists_exactly_the_defined_codes_once() -> None:
    listed = catalogued(CATALOG.read_text())
    defined = set(definitions(error_classes()))
    assert sorted(code for code in set(listed) if listed.count(code) > 1) == []
    assert sorted(defined - set(listed)) == [], "defined in src/ but missing from docs/errors.md"
    assert sorted(set(listed) - defined) == [], "in docs/errors.md but defined nowhere in src/"


# -- the collectors themselves -------------------------------------------------------------------
class _Family(TetherError):
    code = "FAMILY_BASE"

    def __init__(self, message: str, *, code: typing.Literal["ONE", "TWO"] | None = None) -> None:
        super().__init__(message, code=code)


class _Member(_Family):
    code = "FAMILY_MEMBER"


def test_definitions_find_class_codes_and_literal_parameters() -> None:
    assert definitions([_Family, _Member]) == {
        "FAMILY_BASE": [f"{__name__}._Family.code"],
        "ONE": [f"{__name__}._Family.__init__(code=...)"],
        "TWO": [f"{__name__}._Family.__init__(code=...)"],
        "FAMILY_MEMBER": [f"{__name__}._Member.code"],
    }


def test_passed_codes_reads_only_calls_of_error_classes() -> None:
    source = (
        'raise ModelError("x", code="MODEL_SCRIPT")\n'
        'raise errors.SandboxError("y", code="SANDBOX_CONFIG")\n'
        'ToolResult.error("z", code="DELEGATED_CALLER")\n'
        "raise ModelError('w', code=code)\n"
    )
    found = list(passed_codes(source, {"ModelError", "SandboxError"}))
    assert found == [(1, "MODEL_SCRIPT"), (2, "SANDBOX_CONFIG")]


def test_catalogued_reads_the_first_column_of_code_rows() -> None:
    text = (
        "| code | meaning | next step |\n"
        "|---|---|---|\n"
        "| `SEQ_CONFLICT` | two writers | retry |\n"
        "`NOT_A_ROW` in prose\n"
        "| `CORRUPT_LOG` | damaged | fsck |\n"
    )
    assert catalogued(text) == ["SEQ_CONFLICT", "CORRUPT_LOG"]
