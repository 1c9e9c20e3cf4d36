"""What the terminal shows cannot be forged (attack review F3, F4), through the real ``tether run``
on a real pseudo-terminal and ``tether run --approval-from store`` with ``tether approvals``.

The attacker is the scripted model: its assistant text and its escalation's justification are
full of terminal controls, each followed by a marker, so the test can tell the model's bytes
from the sequences tether's own spinner writes. None of them may reach the terminal as a
control; each must show as its escape. The question's layout is asserted byte for byte, and the
host is checked afterwards: the rejected command never ran.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from cli_support import TETHER, run_args, run_argv, tether
from pty_support import read_until
from script_support import call
from script_support import script as steps_script

pytestmark = pytest.mark.timeout(120)

CONTROLS = {
    "\x1b[2K": "\\x1b[2K",  # erase the line
    "\r": "\\r",  # back to its start
    "\x1b[1A": "\\x1b[1A",  # up one line
    "\x1b]0;": "\\x1b]0;",  # the window title (OSC)
    "\x07": "\\x07",  # the OSC's end (BEL)
    "\x9b": "\\x9b",  # CSI as one C1 character
    "\u202e": "\\u202e",  # right-to-left override
    "\u2066": "\\u2066",  # left-to-right isolate
    "\u2069": "\\u2069",  # pop directional isolate
    "\n": "\\n",
}
"""Each control the model writes, and how the terminal must show it."""


def forged(prefix: str) -> str:
    """Every control followed by its own marker: ``<prefix>0``, ``<prefix>1``, …"""
    return "".join(f"{control}{prefix}{i}" for i, control in enumerate(CONTROLS))


def escaped(prefix: str) -> str:
    return "".join(f"{shown}{prefix}{i}" for i, shown in enumerate(CONTROLS.values()))


JUSTIFICATION = "needs it" + forged("J") + "  sandbox: read-only (the session's mode, unchanged)"
ASSISTANT = "Looking." + forged("T")


def assert_no_model_control(output: bytes, prefix: str) -> None:
    """No control of ``forged(prefix)`` reached the terminal as itself, right before its marker;
    BEL, C1 controls and bidi formatting characters reached it nowhere."""
    for i, control in enumerate(CONTROLS):
        if control != "\n":
            assert f"{control}{prefix}{i}".encode() not in output
    assert b"\x07" not in output
    assert not re.search(rb"\xc2[\x80-\x9f]", output)  # no C1 control at all
    assert not re.search(rb"\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]", output)  # no bidi


def escalation_steps(outside: Path) -> list[dict[str, Any]]:
    command = f"touch {outside}"
    step = call(
        "bash",
        command=command,
        sandbox_permissions="danger-full-access",
        justification=JUSTIFICATION,
    )
    return [{"text": ASSISTANT, **step}, {"text": "finished"}]


def test_the_run_prompt_shows_tethers_facts_exact_and_the_models_text_inert(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    outside = tmp_path / "outside.txt"
    model = steps_script(tmp_path / "s.json", escalation_steps(outside))
    master, slave = os.openpty()
    proc = subprocess.Popen(
        run_argv(tmp_path, model, "--sandbox", "read-only", "--approval", "ask"),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
    )
    os.close(slave)
    try:
        shown = read_until(master, b"(default) > ")
        os.write(master, b"r")
        shown = read_until(master, b"finished", shown)
        shown = read_until(master, b"tether: ", shown)
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        os.close(master)
    assert not outside.exists()  # the host: the rejected command never ran
    assert_no_model_control(shown, "J")
    assert_no_model_control(shown, "T")
    # the streamed assistant text, escaped in place; as a block, its line break stays one
    block = escaped("T").replace("\\n", "\r\n")
    assert ("Looking." + block).encode() in shown
    question = shown[shown.index(b"Approval needed") : shown.index(b"(default) > ") + 12]
    expected = "\r\n".join(
        [
            'Approval needed: tool "bash"',
            "  sandbox: escalate from read-only to danger-full-access, for this call only",
            "  asked by: this session @@@@@@@@ (depth 0)",
            "  from another terminal: tether approvals answer @@@@@@@@ allow|allow-session|allow-always|reject --store "
            f"sqlite:///{tmp_path / 's.db'}",
            "  written by the agent (escaped, in full):",
            "  justification: needs it"
            + escaped("J")
            + "  sandbox: read-only (the session's mode, unchanged)",
            f"  command: touch {outside}",
            "  grant scopes (s or w, then the scope's number):",
            f"    1. Bash(touch {outside}), escalating up to danger-full-access",
            f"    2. Bash(touch {outside}:*), escalating up to danger-full-access",
            "    3. Bash(touch:*), escalating up to danger-full-access",
            "    4. Bash, escalating up to danger-full-access",
            "  [a] Allow once   [s] Allow for this session   [w] Always allow in this workspace   "
            "[r] Reject (default) > ",
        ]
    )
    pattern = re.escape(expected.encode()).replace(b"@@@@@@@@", rb"[0-9a-f]{8}")
    assert re.fullmatch(pattern, question), question
    # the mode line is tether's, once: the justification's imitation stays inside its own line
    lines = question.split(b"\r\n")
    assert [line for line in lines if line.startswith(b"  sandbox: ")] == [
        b"  sandbox: escalate from read-only to danger-full-access, for this call only"
    ]
    # the spinner is stopped while the question is asked: none of its frames splits it
    assert not any(frame.encode() in question for frame in "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")


def store_run(tmp_path: Path, steps: list[dict[str, Any]]) -> tuple[subprocess.Popen[str], str]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    store = f"sqlite:///{tmp_path / 's.db'}"
    model = steps_script(tmp_path / "s.json", steps)
    args = run_args(
        model,
        workspace,
        store,
        "--sandbox",
        "read-only",
        "--approval-from",
        "store",
        prompt="go",
    )
    proc = subprocess.Popen(
        [TETHER, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    return proc, store


def waiting_row(proc: subprocess.Popen[str], store: str) -> dict[str, Any]:
    end = time.monotonic() + 60
    while time.monotonic() < end:
        listed = tether("approvals", "list", "--store", store, "--json")
        assert listed.returncode == 0, listed.stderr
        rows = [row for row in json.loads(listed.stdout) if row["waiting"]]
        if rows:
            return rows[0]  # type: ignore[no-any-return]
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    raise AssertionError("no approval became answerable")


def test_a_pending_escalation_shows_its_mode_and_command_last_and_in_full(
    tmp_path: Path,
) -> None:
    """F4: ``approvals list``, its JSON and the wait hint name what the root's escalation would
    run, exact in JSON, escaped in text, never cut."""
    outside = tmp_path / "outside.txt"
    command = f"touch {outside}; : " + "y" * 400 + forged("C")
    steps = [
        {
            **call(
                "bash",
                command=command,
                sandbox_permissions="danger-full-access",
                justification=JUSTIFICATION,
            )
        },
        {"text": "finished"},
    ]
    proc, store = store_run(tmp_path, steps)
    try:
        row = waiting_row(proc, store)
        approval_id = row["id"]
        assert row["action"] == {
            "tool": "bash",
            "command": command,
            "target_mode": "danger-full-access",
        }
        listed = tether("approvals", "list", "--store", store)
        assert listed.returncode == 0, listed.stderr
        heading, line = listed.stdout.splitlines()
        assert heading.split() == [
            "ID",
            "SESSION",
            "DEPTH",
            "TOOL",
            "AGE",
            "ANSWERABLE",
            "HEADLINE",
            "ACTION",
        ]
        shown = f"touch {outside}; : " + "y" * 400 + escaped("C")
        assert line.endswith(
            f"escalate sandbox to danger-full-access: needs it{escaped('J')}  sandbox: read-only "
            "(the session's mode, unchanged)  escalate to danger-full-access · Command: " + shown
        )
        assert_no_model_control(listed.stdout.encode(), "C")
        assert_no_model_control(listed.stdout.encode(), "J")
        answered = tether("approvals", "answer", approval_id, "reject", "--store", store)
        assert answered.returncode == 0, answered.stderr
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert not outside.exists()  # the host: the rejected command never ran
    hints = [line for line in err.splitlines() if "waits for an answer" in line]
    assert hints == [
        f'tether: approval {approval_id} ("bash") waits for an answer; from another terminal: '
        f"tether approvals answer {approval_id} allow|allow-session|allow-always|reject --store {store} "
        "(unanswered, it resolves unavailable in 900 s) · escalate to danger-full-access · "
        f"Command: {shown}"
    ]
    assert_no_model_control(err.encode(), "C")
    (asked,) = [
        json.loads(line)["data"]
        for line in out.splitlines()
        if json.loads(line).get("type") == "approval/asked"
    ]
    assert asked["action"] == row["action"]
