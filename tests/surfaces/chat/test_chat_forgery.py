"""``tether chat`` on a real pseudo-terminal shows what the model and its commands wrote inert
(attack review F3): assistant text, a tool result made of the command's own escape sequences,
and an escalation's justification all reach the terminal as escapes, never as controls; the
question's mode line is tether's and exact; the host is checked after the rejected escalation.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tty_support import chat

from script_support import call
from script_support import script as steps_script

FORGED = "\x1b[2KF0\rF1\x1b]0;F2\x07\x9bF3\u202eF4\u2067F5"
"""Controls the model writes, each followed by a marker."""
SHOWN = "\\x1b[2KF0\\rF1\\x1b]0;F2\\x07\\x9bF3\\u202eF4\\u2067F5"
RESULT_SHOWN = "\\x1b]0;R0\\x07\\x1b[2KR1\\rR2"
"""What ``printf`` writes (a title, an erased line, a carriage return), as the result shows."""


@pytest.mark.timeout(120)
def test_chat_shows_model_and_command_text_inert_and_the_mode_line_exact(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    outside = tmp_path / "outside.txt"
    steps = [
        {
            "text": "Escalating." + FORGED,
            **call(
                "bash",
                command=f"touch {outside}",
                sandbox_permissions="danger-full-access",
                justification="because" + FORGED,
            ),
        },
        call("bash", command=r"printf '\033]0;R0\007\033[2KR1\rR2\n'"),
        {"text": "finished" + FORGED},
    ]
    model = steps_script(tmp_path / "s.json", steps)
    args = [
        "--model",
        f"scripted:{model}",
        "--workspace",
        str(workspace),
        "--store",
        f"sqlite:///{tmp_path / 's.db'}",
        "--sandbox",
        "workspace-write",
        "--approval",
        "ask",
    ]
    with chat(args, tmp_path) as term:
        term.wait_for("›".encode())
        term.type(b"go\r")
        question = term.wait_for(b"Reject (default) >")
        term.type(b"r")
        rest = term.wait_for(b"finished")
        rest += term.wait_for(b"approvals: 1 asked")
    assert not outside.exists()  # the host: the rejected command never ran
    shown = question + rest
    for i, marker in enumerate(("F0", "F1", "F2", "F3", "F4", "F5")):
        raw = ["\x1b[2K", "\r", "\x1b]0;", "\x9b", "\u202e", "\u2067"][i]
        assert f"{raw}{marker}".encode() not in shown
    for marker in ("R0", "R1", "R2"):
        assert not re.search(rb"(\x1b\]0;|\x1b\[2K|\r)" + marker.encode(), shown)
    assert b"\x07" not in shown
    assert not re.search(rb"\xc2[\x80-\x9f]", shown)
    assert not re.search(rb"\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]", shown)
    # each text shows escaped: the assistant's, the justification, the command's own output
    plain = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", shown)  # tether's own styling removed
    assert f"Escalating.{SHOWN}".encode() in plain
    assert f"finished{SHOWN}".encode() in plain
    assert RESULT_SHOWN.encode() in plain
    # the question is printed whole (the status area redraws only around it)
    question_lines = [
        'Approval needed: tool "bash"',
        "  sandbox: escalate from workspace-write to danger-full-access, for this call only",
        "  asked by: this session @@@@@@@@ (depth 0)",
        f"  from another terminal: tether approvals answer @@@@@@@@ allow|allow-session|allow-always|reject --store "
        f"sqlite:///{tmp_path / 's.db'}",
        "  written by the agent (escaped, in full):",
        f"  justification: because{SHOWN}",
        f"  command: touch {outside}",
        "",
    ]
    pattern = re.escape("\r\n".join(question_lines).encode()).replace(b"@@@@@@@@", rb"[0-9a-f]{8}")
    # a line wider than the terminal (160 columns) is wrapped at a space
    pattern = pattern.replace(rb"\-\-store\ ", rb"\-\-store\ (?:\r\n)?")
    assert re.search(pattern, plain), plain
    assert plain.count(b"  sandbox: ") == 1
