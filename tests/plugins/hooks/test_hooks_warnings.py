"""A workspace's ``.claude/settings.json`` or ``._codex/hooks.json`` with hooks or permissions
that a run does not use is said on stderr by ``tether run`` (and by ``doctor``), one escaped
line each, with how to enable it; nothing is enabled by the warning. Permissions rules are
applied once the file's content is trusted, and then nothing is said of them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hooks_support import script

from cli_support import tether

pytestmark = pytest.mark.timeout(120)


def _workspace(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace whose ``.claude/settings.json`` has a Bash guard (it would leave a marker)
    and a deny rule; returns it and the marker path."""
    workspace = tmp_path / "ws"
    (workspace / ".claude").mkdir(parents=True)
    (workspace / "out").mkdir()  # commands write below the root, not in it
    marker = workspace / "out" / "guard-ran"
    guard = script(
        workspace / ".claude", "guard.sh", f"#!/bin/sh\ncat >/dev/null\ntouch {marker}\nexit 2\n"
    )
    (workspace / ".claude" / "settings.json").write_text(
        json.dumps(
            {
                "permissions": {"deny": ["Bash(rm -rf:*)"], "allow": []},
                "hooks": {
                    "PreToolUse": [
                        {"matcher": "Bash", "hooks": [{"type": "command", "command": guard}]}
                    ],
                    "Stop": [{"hooks": [{"type": "command", "command": "cat >/dev/null"}]}],
                },
            }
        )
    )
    return workspace, marker


def _model(tmp_path: Path) -> Path:
    path = tmp_path / "script.json"
    steps: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "true"}}]},
        {"text": "done"},
    ]
    path.write_text(json.dumps({"agents": [{"match": {}, "steps": steps}]}))
    return path


def _run(tmp_path: Path, workspace: Path, *extra: str) -> tuple[int, list[str]]:
    done = tether(
        "run",
        "go",
        "--model",
        f"scripted:{_model(tmp_path)}",
        "--workspace",
        str(workspace),
        "--store",
        f"sqlite:///{tmp_path / 's.db'}",
        "--sandbox",
        "workspace-write",
        "--approval",
        "never",
        "--json",
        *extra,
    )
    warnings = [line for line in done.stderr.splitlines() if line.startswith("tether: warning:")]
    return done.returncode, warnings


def _hooks_line(workspace: Path, remedy: str) -> str:
    return (
        "tether: warning: .claude/settings.json has hooks (PreToolUse, Stop) that are not "
        f"enabled; {remedy}tether trust --workspace {workspace}"
    )


def _permissions_line(workspace: Path) -> str:
    return (
        "tether: warning: .claude/settings.json has permissions rules (deny: 1) that are not "
        "applied: its content is not trusted; review and trust it with: tether trust "
        f"--workspace {workspace}"
    )


def test_run_warns_of_settings_hooks_and_permissions_it_does_not_use(tmp_path: Path) -> None:
    workspace, marker = _workspace(tmp_path)
    code, warnings = _run(tmp_path, workspace)
    assert code == 0
    assert warnings == [
        _hooks_line(
            workspace,
            "list it in the hooks plugin's settings_files in tether.toml, then trust it with: ",
        ),
        _permissions_line(workspace),
    ]
    assert not marker.exists()  # the warning enabled nothing


def test_plugin_hooks_without_the_file_listed_still_warns(tmp_path: Path) -> None:
    workspace, marker = _workspace(tmp_path)
    code, warnings = _run(tmp_path, workspace, "--plugin", "hooks")
    assert code == 0
    assert warnings[0].startswith(
        "tether: warning: .claude/settings.json has hooks (PreToolUse, Stop) that are not enabled"
    )
    assert not marker.exists()


def test_a_listed_and_trusted_file_is_enabled_with_its_permissions_and_nothing_is_said(
    tmp_path: Path,
) -> None:
    workspace, marker = _workspace(tmp_path)
    (workspace / "tether.toml").write_text(
        '[[plugins]]\nname = "hooks"\nconfig = { settings_files = [".claude/settings.json"] }\n'
    )
    assert tether("trust", "--workspace", str(workspace)).returncode == 0
    code, warnings = _run(tmp_path, workspace)
    assert warnings == []
    assert marker.exists()  # the guard ran (and blocked the bash call)
    assert code == 0


def test_codex_hooks_file_is_named_with_its_option(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / ".codex").mkdir(parents=True)
    (workspace / ".codex" / "hooks.json").write_text(
        json.dumps(
            {"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": "x"}]}]}}
        )
    )
    code, warnings = _run(tmp_path, workspace)
    assert code == 0
    assert warnings == [
        "tether: warning: .codex/hooks.json has Codex hooks (UserPromptSubmit) that are not "
        "enabled; list it in the hooks plugin's codex_files in tether.toml, then trust it "
        f"with: tether trust --workspace {workspace}"
    ]


def test_event_names_from_the_file_are_escaped(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / ".claude").mkdir(parents=True)
    (workspace / ".claude" / "settings.json").write_text(
        json.dumps({"hooks": {"Pre\x1b[2JToolUse": [{"hooks": []}]}})
    )
    _, warnings = _run(tmp_path, workspace)
    assert warnings[0].startswith(
        "tether: warning: .claude/settings.json has hooks (Pre\\x1b[2JToolUse) that are not"
    )


def test_doctor_reports_the_same_findings(tmp_path: Path) -> None:
    workspace, _ = _workspace(tmp_path)
    done = tether(
        "doctor", "--workspace", str(workspace), "--store", f"sqlite:///{tmp_path / 's.db'}"
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("hooks:")]
    assert lines == [
        "hooks: problem: .claude/settings.json has hooks (PreToolUse, Stop) that are not "
        "enabled; list it in the hooks plugin's settings_files in tether.toml, then trust it "
        f"with: tether trust --workspace {workspace}",
    ]
    permissions = [line for line in done.stdout.splitlines() if line.startswith("permissions:")]
    assert permissions[-1] == (
        "permissions: problem: .claude/settings.json has permissions rules (deny: 1) that are "
        "not applied: its content is not trusted; review and trust it with: tether trust "
        f"--workspace {workspace}"
    )
    assert done.returncode == 0


def test_a_listed_file_that_is_not_trusted_is_named_with_the_trust_remedy(tmp_path: Path) -> None:
    workspace, _ = _workspace(tmp_path)
    (workspace / "tether.toml").write_text(
        '[[plugins]]\nname = "hooks"\nconfig = { settings_files = [".claude/settings.json"] }\n'
    )
    done = tether(
        "doctor", "--workspace", str(workspace), "--store", f"sqlite:///{tmp_path / 's.db'}"
    )
    hooks_lines = [line for line in done.stdout.splitlines() if line.startswith("hooks:")]
    assert hooks_lines[:1] == [
        "hooks: problem: .claude/settings.json has hooks (PreToolUse, Stop) that are not "
        "enabled; its content is not trusted: review and trust it with: tether trust "
        f"--workspace {workspace}"
    ]
    # tether run refuses the workspace instead, naming the file, and adds no hooks warning.
    code, warnings = _run(tmp_path, workspace)
    assert (code, warnings) == (1, [])
    # Trusted for this run only (--trust-workspace), the hooks are enabled.
    code, warnings = _run(tmp_path, workspace, "--trust-workspace")
    assert (code, warnings) == (0, [])
