"""What ``tether run --json`` printed, and the stored tree, for the end-to-end tests (no tests
here). ``env`` is a test's fixture dict: ``env["store"]`` is the run's store URL."""

from __future__ import annotations

import json
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

from cli_support import tether
from tether.model._settings import user_config_path


class JsonRun:
    """One ``tether run --json``: every event line grouped by session, and the result."""

    def __init__(self, proc: subprocess.CompletedProcess[str]) -> None:
        self.proc = proc
        lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
        self.lines = lines[:-1]
        self.result = lines[-1] if lines else {}
        self.sessions: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for line in self.lines:
            self.sessions[line["session"]].append(line)

    @property
    def root(self) -> str:
        return str(self.result["session"])

    def children(self) -> list[str]:
        return [s for s in self.sessions if s != self.root]

    def of_type(self, session: str, event_type: str) -> list[dict[str, Any]]:
        return [line["data"] for line in self.sessions[session] if line["type"] == event_type]

    def kinds(self, session: str) -> list[str]:
        return [line["type"] for line in self.sessions[session]]

    def audit(self, session: str) -> list[tuple[str, dict[str, Any]]]:
        """The session's tool and approval events, in order."""
        return [
            (line["type"], line["data"])
            for line in self.sessions[session]
            if line["type"].startswith(("tool/", "approval/a", "approval/d", "approval/pending"))
        ]

    def policy(self, session: str) -> list[tuple[str, dict[str, Any]]]:
        """The session's ``sandbox/mode`` and ``approval/policy`` events, in order."""
        return [
            (line["type"], line["data"])
            for line in self.sessions[session]
            if line["type"] in ("sandbox/mode", "approval/policy")
        ]

    def notices(self, session: str) -> list[dict[str, Any]]:
        """The ``subagent-settled`` notices the session was told."""
        return [
            m
            for m in self.of_type(session, "user/message")
            if m["source"]["kind"] == "subagent-settled"
        ]


def tree(env: dict[str, Any], root: str) -> dict[str, Any]:
    """``tether sessions tree ROOT --json`` of the run's store."""
    proc = tether("sessions", "tree", root, "--store", env["store"], "--json")
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def stored(env: dict[str, Any], session: str) -> list[dict[str, Any]]:
    """The events of ``session`` as ``tether sessions show --json`` prints them."""
    proc = tether("sessions", "show", session, "--store", env["store"], "--json")
    assert proc.returncode == 0, proc.stderr
    return list(json.loads(proc.stdout)["events"])


def write_user_config(text: str) -> Path:
    """Write the user's configuration file (``tether.toml`` in the test's own config
    directory) and return its path."""
    path = user_config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path
