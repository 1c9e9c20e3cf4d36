"""``tether chat`` says at start which hook files of the workspace it will not run (the same
line as ``tether run``; ``docs/hooks.md``, "Files that are not enabled")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tty_support import chat, chat_args


@pytest.mark.timeout(120)
def test_chat_warns_of_a_settings_file_whose_hooks_are_not_enabled(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / ".claude").mkdir(parents=True)
    hooks = {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "x"}]}]}
    (workspace / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))
    with chat(chat_args(tmp_path, workspace), tmp_path) as term:
        term.wait_for(
            b"tether: warning: .claude/settings.json has hooks (PreToolUse) that are not "
            b"enabled; list it in the hooks plugin's settings_files in tether.toml, then trust "
            b"it with: tether trust --workspace " + str(workspace).encode() + b"\r\n"
        )
