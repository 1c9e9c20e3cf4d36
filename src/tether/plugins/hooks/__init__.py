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

from tether.plugins.hooks._plugin import HooksPlugin, plugin
from tether.plugins.hooks._protocol import HookDecision, HookReply
from tether.plugins.hooks._service import HOOKS_SERVICE, HookService
from tether.plugins.hooks._settings import HookEvent

__all__ = [
    "HOOKS_SERVICE",
    "HookDecision",
    "HookEvent",
    "HookReply",
    "HookService",
    "HooksPlugin",
    "plugin",
]
