"""Credentials and histories below a home directory that an agent must never see: the tests
that check confined commands (``sandbox/``) and the file tools (``tools/fs/``) check the same
list."""

from __future__ import annotations

TOKENS_AND_HISTORIES: tuple[str, ...] = (
    ".claude/.credentials.json",
    ".codex/auth.json",
    ".config/github-copilot/hosts.json",
    ".config/github-copilot/apps.json",
    ".m2/settings.xml",
    ".gradle/gradle.properties",
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".psql_history",
    ".mysql_history",
    ".node_repl_history",
)
"""Agent tokens, build tools' credentials and the histories passwords get typed into."""
