"""Claude Code-compatible command hooks (issue 3 item 6); see ``docs/hooks.md``.

Load it as plugin ``hooks``::

    [[plugins]]
    name = "hooks"
    config = { settings_files = [".claude/settings.json"], hooks = { PreToolUse = [
        { matcher = "Bash", hooks = [{ type = "command", command = "./guard.sh", timeout = 10 }] },
    ] } }
"""

from tether.plugins.hooks.matcher import InvalidMatcherError, Matcher, compile_matcher
from tether.plugins.hooks.payload import (
    CLAUDE_TOOL_NAMES,
    claude_tool_input,
    claude_tool_name,
    claude_tool_response,
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
    HookEvent,
    HookHandler,
    HookSettingsError,
    parse_hooks_block,
    parse_settings_file,
    settings_paths,
)

__all__ = [
    "CLAUDE_TOOL_NAMES",
    "DIALECT",
    "HOOKS_SERVICE",
    "CommandRun",
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
    "claude_tool_input",
    "claude_tool_name",
    "claude_tool_response",
    "compile_matcher",
    "hook_env",
    "interpret",
    "load_handlers",
    "merge",
    "parse_hooks_block",
    "parse_settings_file",
    "plugin",
    "run_command",
    "settings_paths",
]
