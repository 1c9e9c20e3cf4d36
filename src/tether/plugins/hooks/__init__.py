"""Command hooks in Claude Code's and Codex's dialects (issue 3 item 6, issue 16); see
``docs/hooks.md``.

Load it as plugin ``hooks``::

    [[plugins]]
    name = "hooks"
    config = { settings_files = [".claude/settings.json"], codex_files = [".codex/hooks.json"],
               hooks = { PreToolUse = [
        { matcher = "Bash", hooks = [{ type = "command", command = "./guard.sh", timeout = 10 }] },
    ] } }
"""

from tether.plugins.hooks.codex import interpret_codex, parse_codex_file
from tether.plugins.hooks.matcher import InvalidMatcherError, Matcher, compile_matcher
from tether.plugins.hooks.matchers_check import unknown_tool_matchers
from tether.plugins.hooks.payload import (
    CLAUDE_TOOL_NAMES,
    claude_tool_input,
    claude_tool_name,
    claude_tool_response,
    tool_names,
)
from tether.plugins.hooks.plugin import HookBridge, HooksConfig, HooksPlugin, load_handlers, plugin
from tether.plugins.hooks.protocol import HookDecision, HookReply, MergedReply, interpret, merge
from tether.plugins.hooks.runner import CommandRun, RunStatus, hook_env, run_command
from tether.plugins.hooks.service import (
    DIALECT,
    HOOKS_SERVICE,
    Dispatch,
    HookService,
    HookSettings,
)
from tether.plugins.hooks.settings import (
    CLAUDE_CODE,
    CODEX,
    MATCHED_EVENTS,
    Dialect,
    HookEvent,
    HookHandler,
    HookSettingsError,
    parse_hooks_block,
    parse_settings_file,
    settings_paths,
)
from tether.plugins.hooks.workspace_check import (
    UnusedHookConfig,
    unused_hook_configs,
    warning_lines,
)

__all__ = [
    "CLAUDE_CODE",
    "CLAUDE_TOOL_NAMES",
    "CODEX",
    "DIALECT",
    "HOOKS_SERVICE",
    "MATCHED_EVENTS",
    "CommandRun",
    "Dialect",
    "Dispatch",
    "HookBridge",
    "HookDecision",
    "HookEvent",
    "HookHandler",
    "HookReply",
    "HookService",
    "HookSettings",
    "HookSettingsError",
    "HooksConfig",
    "HooksPlugin",
    "InvalidMatcherError",
    "Matcher",
    "MergedReply",
    "RunStatus",
    "UnusedHookConfig",
    "claude_tool_input",
    "claude_tool_name",
    "claude_tool_response",
    "compile_matcher",
    "hook_env",
    "interpret",
    "interpret_codex",
    "load_handlers",
    "merge",
    "parse_codex_file",
    "parse_hooks_block",
    "parse_settings_file",
    "plugin",
    "run_command",
    "settings_paths",
    "tool_names",
    "unknown_tool_matchers",
    "unused_hook_configs",
    "warning_lines",
]
