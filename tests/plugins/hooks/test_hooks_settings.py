"""Matcher semantics and hook settings (inline ``tether.toml`` and settings files)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hooks_support import group, trusted_files

from tether.kernel import WORKSPACE_FILES, PluginConfigError
from tether.kernel._config import load_plugins, read_config
from tether.kernel._plugin import Kernel
from tether.kernel._workspace_files import WorkspaceFiles
from tether.plugins.hooks import HookEvent, HookService, plugin
from tether.plugins.hooks._codex import parse_codex_file
from tether.plugins.hooks._matcher import compile_matcher
from tether.plugins.hooks._service import HOOKS_SERVICE
from tether.plugins.hooks._settings import HookSettingsError, parse_hooks_block, parse_settings_file
from tether.policy._sandbox_policy import sandbox_policy_plugin


# -- matcher ---------------------------------------------------------------------------------
@pytest.mark.parametrize("pattern", [None, "", "*"])
def test_absent_empty_and_star_match_everything(pattern: str | None) -> None:
    matcher = compile_matcher(pattern)
    assert matcher.matches_all
    assert all(matcher.matches(n) for n in ("Bash", "Write", "mcp__x__y", ""))


def test_pure_word_pattern_is_a_literal_alternation() -> None:
    matcher = compile_matcher("Edit|Write")
    assert [matcher.matches(n) for n in ("Edit", "Write", "MultiEdit", "Edit|Write", "edit")] == [
        True,
        True,
        False,
        False,
        False,
    ]
    # As in Claude Code, a bare server prefix is an exact name and matches none of its tools.
    assert not compile_matcher("mcp__lab").matches("mcp__lab__probe")
    assert compile_matcher("Bash").matches("Bash")
    assert not compile_matcher("Bash").matches("BashOutput")


def test_anything_else_is_an_unanchored_regex() -> None:
    assert compile_matcher("Notebook.*").matches("NotebookEdit")
    assert compile_matcher("mcp__lab__.*").matches("mcp__lab__probe")
    assert not compile_matcher("mcp__lab__.*").matches("mcp__other__probe")
    assert compile_matcher("^(Edit|Write)$").matches("Write")
    assert not compile_matcher("^(Edit|Write)$").matches("MultiWrite")
    assert compile_matcher("Ed.t").matches("MultiEdit")  # search, like RegExp.test


# -- inline config (strict) ------------------------------------------------------------------
def load(hooks: object, **config: object) -> HookService:
    kernel = Kernel()
    full = {"hooks": hooks, **config}
    if config.get("settings_files"):
        root = str(config.get("project_dir") or os.getcwd())
        kernel.ctx.provide(WORKSPACE_FILES, trusted_files(root, full))
    kernel.load(plugin, full)
    service = kernel.ctx.get(HOOKS_SERVICE)
    assert isinstance(service, HookService)
    return service


def test_inline_hooks_get_stable_handler_ids() -> None:
    service = load(
        {
            "PreToolUse": [group("a", "Bash", timeout=5), group("b")],
            "Stop": [{"hooks": [{"type": "command", "command": "c"}]}],
        }
    )
    assert [
        (h.event, h.matcher.pattern, h.command, h.timeout, h.handler_id) for h in service.handlers
    ] == [
        (HookEvent.PRE_TOOL_USE, "Bash", "a", 5.0, "tether.toml#PreToolUse[0].hooks[0]"),
        (HookEvent.PRE_TOOL_USE, None, "b", None, "tether.toml#PreToolUse[1].hooks[0]"),
        (HookEvent.STOP, None, "c", None, "tether.toml#Stop[0].hooks[0]"),
    ]


@pytest.mark.parametrize(
    ("hooks", "message"),
    [
        (
            {"PreToolUs": [group("x")]},
            "tether.toml: unknown hook event 'PreToolUs' (supported: PreToolUse, PostToolUse, "
            "UserPromptSubmit, Stop, SubagentStart, SubagentStop, SessionStart)",
        ),
        (
            {"PreToolUse": [{"hooks": [{"type": "prompt", "prompt": "is it safe?"}]}]},
            "tether.toml: PreToolUse[0].hooks[0]: unknown key(s) 'prompt'",
        ),
        (
            {"PreToolUse": [{"hooks": [{"type": "prompt"}]}]},
            "tether.toml: PreToolUse[0].hooks[0]: hook type 'prompt' is not supported "
            '(tether runs only type "command")',
        ),
        (
            {"PreToolUse": [{"hooks": [{"type": "command", "command": " "}]}]},
            "tether.toml: PreToolUse[0].hooks[0].command: must be a non-empty string",
        ),
        (
            {"PreToolUse": [group("x", timeout=0)]},
            "tether.toml: PreToolUse[0].hooks[0].timeout: must be a positive number of seconds",
        ),
        (
            {"PreToolUse": [group("x", "Bash(")]},
            "tether.toml: PreToolUse[0].matcher: matcher 'Bash(' is not a valid regular "
            "expression: missing ), unterminated subpattern at position 4",
        ),
        (
            {"PreToolUse": {"matcher": "x"}},
            "tether.toml: PreToolUse: must be a list of matcher groups",
        ),
        (
            {"Stop": [{"matcher": "", "hooks": "echo"}]},
            "tether.toml: Stop[0].hooks: must be a list of hook handlers",
        ),
    ],
)
def test_invalid_inline_hooks_fail_the_load_naming_the_place(hooks: object, message: str) -> None:
    with pytest.raises(PluginConfigError) as info:
        load(hooks)
    assert str(info.value) == f"plugin 'hooks': invalid config: hooks: {message}"


def test_invalid_plugin_options_fail_the_load() -> None:
    with pytest.raises(PluginConfigError, match="default_timeout"):
        load({}, default_timeout=0)
    with pytest.raises(PluginConfigError, match="unknown_option"):
        load({}, unknown_option=True)


# -- settings files (lenient about what tether does not bridge) -------------------------------
def test_settings_file_uses_claude_codes_shape(tmp_path: Path) -> None:
    claude = tmp_path / ".claude"
    claude.mkdir()
    (claude / "settings.json").write_text(
        json.dumps(
            {
                "permissions": {"allow": ["Bash(ls)"]},
                "hooks": {
                    "PreToolUse": [
                        {
                            "matcher": "Write|Edit",
                            "hooks": [
                                {
                                    "type": "command",
                                    "command": "guard.sh",
                                    "timeout": 30,
                                    "statusMessage": "checking",
                                }
                            ],
                        }
                    ],
                    "Notification": [{"hooks": [{"type": "command", "command": "notify"}]}],
                    "PreCompact": [{"hooks": [{"type": "prompt", "prompt": "?"}]}],
                },
            }
        )
    )
    service = load(
        {"PreToolUse": [group("inline.sh")]},
        settings_files=[".claude/settings.json", ".claude/settings.local.json"],
        project_dir=str(tmp_path),
    )
    assert [(h.command, h.matcher.pattern, h.timeout, h.handler_id) for h in service.handlers] == [
        ("inline.sh", None, None, "tether.toml#PreToolUse[0].hooks[0]"),
        ("guard.sh", "Write|Edit", 30.0, ".claude/settings.json#PreToolUse[0].hooks[0]"),
    ]


def test_a_malformed_settings_file_fails_the_load(tmp_path: Path) -> None:
    bad = tmp_path / "settings.json"
    bad.write_text("{not json")
    with pytest.raises(PluginConfigError) as info:
        load({}, settings_files=[str(bad)])
    assert str(info.value).startswith(f"plugin 'hooks': {bad}: not valid JSON: ")
    bad.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [{"type": "http", "url": "x"}]}]}}))
    with pytest.raises(PluginConfigError) as info:
        load({}, settings_files=[str(bad)])
    assert str(info.value) == (
        f"plugin 'hooks': {bad}: Stop[0].hooks[0]: hook type 'http' is not supported "
        '(tether runs only type "command")'
    )
    with pytest.raises(HookSettingsError, match="must be a JSON object"):
        parse_settings_file(b"[]", str(bad))
    with pytest.raises(HookSettingsError) as nested:
        parse_settings_file(b"[" * 100_000, str(bad))
    assert str(nested.value) == f"{bad}: not valid JSON: nested too deeply"
    toml = str(tmp_path / "config.toml")
    with pytest.raises(HookSettingsError) as nested:
        parse_codex_file(b"x = " + b"[" * 3000 + b"]" * 3000 + b"\n[hooks]\n", toml)
    assert str(nested.value) == f"{toml}: not valid TOML: nested too deeply"


def test_identical_commands_run_once_per_dispatch() -> None:
    service = load(
        {
            "PreToolUse": [group("same", "Bash"), group("same", "*"), group("other", "Write")],
        }
    )
    assert [h.command for h in service.matching(HookEvent.PRE_TOOL_USE, "Bash")] == ["same"]
    assert [h.command for h in service.matching(HookEvent.PRE_TOOL_USE, "Write")] == [
        "same",
        "other",
    ]


def test_matcher_is_ignored_for_events_without_a_subject() -> None:
    handlers = parse_hooks_block(
        {"Stop": [group("s", "Bash")], "UserPromptSubmit": [group("u", "Nope")]},
        "x",
        strict=True,
    )
    kernel = Kernel()
    service = HookService(kernel.ctx, handlers, load({}).settings)
    assert [h.command for h in service.matching(HookEvent.STOP, None)] == ["s"]
    assert [h.command for h in service.matching(HookEvent.USER_PROMPT_SUBMIT, None)] == ["u"]


def test_loads_from_tether_toml_through_the_entry_point(tmp_path: Path) -> None:
    toml = tmp_path / "tether.toml"
    toml.write_text(
        "[[plugins]]\n"
        'name = "hooks"\n'
        'config = { default_timeout = 10, hooks = { PreToolUse = [{ matcher = "Bash", hooks = '
        '[{ type = "command", command = "guard.sh", timeout = 3 }] }] } }\n'
    )
    kernel = Kernel()
    load_plugins(kernel, read_config(toml).plugins)
    service = kernel.ctx.get(HOOKS_SERVICE)
    assert isinstance(service, HookService)
    assert service.settings.default_timeout == 10
    assert [(h.command, h.timeout) for h in service.handlers] == [("guard.sh", 3.0)]
    # Only the points with handlers are listened on: no per-call cost elsewhere.
    assert len(kernel.runtime._chain("tools/pre-execute", None)) == 1
    assert kernel.runtime._chain("tools/post-execute", None) == []
    kernel.dispose()
    assert kernel.ctx.get(HOOKS_SERVICE) is None
    assert kernel.runtime._chain("tools/pre-execute", None) == []


def test_relative_settings_files_belong_to_the_workspace(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / ".claude").mkdir(parents=True)
    (workspace / ".claude" / "settings.json").write_text(
        json.dumps({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify"}]}]}})
    )
    config = {"settings_files": [".claude/settings.json"]}
    kernel = Kernel()
    kernel.load(sandbox_policy_plugin, {"mode": "read-only", "workspace_root": str(workspace)})
    kernel.ctx.provide(WORKSPACE_FILES, trusted_files(str(workspace), config))
    kernel.load(plugin, config)
    service = kernel.ctx.get(HOOKS_SERVICE)
    assert isinstance(service, HookService)
    assert [h.handler_id for h in service.handlers] == [".claude/settings.json#Stop[0].hooks[0]"]
    assert service.settings.project_dir == str(workspace)


def test_settings_files_are_read_only_through_workspace_trust(tmp_path: Path) -> None:
    """Without the ``workspace_files`` service nothing is read; with it, a workspace file the
    plugin did not declare (so nobody checked it) is refused."""
    (tmp_path / "settings.json").write_text('{"hooks": {}}')
    config = {"settings_files": ["settings.json"], "project_dir": str(tmp_path)}
    with pytest.raises(PluginConfigError) as info:
        Kernel().load(plugin, config)
    assert str(info.value) == (
        "plugin 'hooks': settings_files are read only through the workspace_files service, "
        "which checks workspace trust: compose with Harness.open, or provide the files of "
        "tether.kernel.inspect_workspace(...) as service 'workspace_files'"
    )
    kernel = Kernel()
    kernel.ctx.provide(WORKSPACE_FILES, WorkspaceFiles(str(tmp_path), {}))
    with pytest.raises(PluginConfigError) as info:
        kernel.load(plugin, config)
    assert str(info.value) == (
        f"plugin 'hooks': settings.json is in workspace {tmp_path} but its plugin did not "
        "declare it (workspace_files), so its content was never checked for trust; it was "
        "not read"
    )
