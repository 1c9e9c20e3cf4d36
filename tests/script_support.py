"""Scripted-model files and the steps they hold (the format: ``docs/design.md`` §6)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

ROOT: Final[Mapping[str, Any]] = {"depth": 0}
"""The ``match`` of an entry only the root session uses."""


def script(path: Path, steps: list[dict[str, Any]], *, match: Mapping[str, Any] = ROOT) -> Path:
    """Write a script of one entry, ``steps`` for the sessions ``match`` selects, to ``path``."""
    path.write_text(json.dumps({"agents": [{"match": dict(match), "steps": steps}]}))
    return path


def write_script(path: Path, agents: Sequence[Mapping[str, Any]]) -> Path:
    """Write a script of several entries (each a ``match`` and its ``steps``) to ``path``."""
    path.write_text(json.dumps({"agents": list(agents)}))
    return path


def call(name: str, **arguments: Any) -> dict[str, Any]:
    """A step that calls one tool."""
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def write(path: str = "out.txt", content: str = "x", **extra: Any) -> dict[str, Any]:
    """A step that calls ``write``."""
    return call("write", path=path, content=content, **extra)
