"""The terminal answerer of ``tether run``, driven through a real pseudo-terminal: the question
drawn whole with no spinner over it, one key per choice (a grant's scope picked by its number),
the asking child named with its lineage, answers from another terminal, and the spinner's clock
while a run waits elsewhere."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import pwd
import re
import subprocess
import termios
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from cli_support import run_argv, tether
from pty_support import read_until
from script_support import call, write_script
from script_support import script as steps_script
from tether.session._json import thaw
from tether.session.persistence import open_persistence
from tether.surfaces.cli._approval_prompt import CHOICES, choice_for
from tether.surfaces.cli._tty_answerer import RUN_ANSWERER, split_keys

pytestmark = pytest.mark.timeout(90)

USER = pwd.getpwuid(os.getuid()).pw_name
ANSWERS = "allow|allow-session|allow-always|reject"
CHOICES_LINE = (
    "  [a] Allow once   [s] Allow for this session   [w] Always allow in this workspace   "
    "[r] Reject (default) > "
)
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
WRITE = [call("write", path="t.txt", content="t"), {"text": "finished"}]


@pytest.mark.parametrize(
    ("key", "outcome"),
    [
        ("a", "allowed-once"),
        ("A", "allowed-once"),
        ("s", "allowed-for-session"),
        ("W", "allowed-always"),
        ("r", "rejected"),
        ("\r", "rejected"),
    ],
)
def test_one_key_gives_one_choice(key: str, outcome: str) -> None:
    choice = choice_for(key)
    assert choice is not None and choice.outcome == outcome
    assert choice_for("x") is None
    assert [c.shown() for c in CHOICES] == [
        "[a] Allow once",
        "[s] Allow for this session",
        "[w] Always allow in this workspace",
        "[r] Reject (default)",
    ]


@pytest.mark.parametrize(
    ("typed", "keys"),
    [
        ("ar", ["a", "r"]),
        ("\x1b[A", ["\x1b[A"]),  # up: its A is not a's capital
        ("\x1bOA", ["\x1bOA"]),
        ("x\x1b[1;5Ay", ["x", "\x1b[1;5A", "y"]),
        ("\x1b[15~", ["\x1b[15~"]),
        ("\x1ba", ["\x1ba"]),  # Alt-a
        ("\x1b", ["\x1b"]),  # Escape
        ("\x1b\x1b[B", ["\x1b", "\x1b[B"]),
        ("\x1b[", ["\x1b["]),
    ],
)
def test_an_escape_sequence_is_one_key(typed: str, keys: list[str]) -> None:
    assert split_keys(typed) == keys


@contextmanager
def run_at_terminal(tmp_path: Path, model: Path, *extra: str) -> Iterator[tuple[int, str]]:
    """``tether run`` on a pseudo-terminal (stdin, stdout and stderr); the master side and
    the store. The run must exit 0 once the body is done."""
    master, slave = os.openpty()
    proc = subprocess.Popen(
        run_argv(tmp_path, model, *extra),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
    )
    os.close(slave)
    try:
        yield master, f"sqlite:///{tmp_path / 's.db'}"
        read_until(master, b"session ", timeout=40)
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.wait()
        os.close(master)


async def _decided(url: str) -> list[dict[str, Any]]:
    persistence = open_persistence(url)
    try:
        found = []
        for header in await persistence.list():
            stored = await persistence.inspect(header.id)
            found += [dict(thaw(e.data)) for e in stored.events if e.type == "approval/decided"]
        return found
    finally:
        await persistence.close()


def decided(store: str) -> list[dict[str, Any]]:
    return asyncio.run(_decided(store))


def question_of(shown: bytes) -> str:
    """The question as drawn: from its first line to the choices."""
    start = shown.rindex(b"Approval needed")
    return shown[start:].decode()


@pytest.mark.parametrize(("key", "written"), [(b"a", True), (b"r", False), (b"\r", False)])
def test_the_question_is_drawn_whole_and_one_key_answers_it(
    tmp_path: Path, key: bytes, written: bool
) -> None:
    model = steps_script(tmp_path / "s.json", WRITE)
    with run_at_terminal(tmp_path, model, "--plugin", "ask_tools") as (master, store):
        shown = read_until(master, b"(default) > ")
        os.write(master, key)  # no Enter
        rest = read_until(master, b"finished")
    outcome = "allowed-once" if written else "rejected"
    assert (tmp_path / "ws" / "t.txt").exists() is written
    (decision,) = decided(store)
    assert decision["outcome"] == outcome
    assert decision["answered_by"] == f"{RUN_ANSWERER} ({USER})"
    approval_id = decision["id"]
    root = re.search(rb"asked by: this session ([0-9a-f]{8})", shown)
    assert root is not None
    assert question_of(shown) == "\r\n".join(
        [
            'Approval needed: tool "write"',
            "  sandbox: workspace-write (the session's mode, unchanged)",
            f"  asked by: this session {root[1].decode()} (depth 0)",
            f"  from another terminal: tether approvals answer {approval_id[:8]} {ANSWERS} "
            f"--store {store}",
            "  written by the agent (escaped, in full):",
            '  reason: run "write": t.txt',
            "  path: t.txt",
            "  grant scopes (s or w, then the scope's number):",
            "    1. Write(./t.txt)",
            "    2. Write(./**)",
            "    3. Write",
            CHOICES_LINE,
        ]
    )
    # the key shows as its choice's letter, then the outcome; no spinner drew in between
    letter = "a" if written else "r"
    assert rest.startswith(f"{letter}\r\n  → {outcome}\r\n".encode())
    # the spinner was stopped before the question: its last frame was erased, none follows
    before = shown[: shown.rindex(b"Approval needed")]
    assert before.endswith(b"\r\n\x1b[?25h\r\x1b[1A\x1b[2K")
    assert not any(frame.encode() in shown[len(before) :] for frame in SPINNER)


SCOPE_LINE = "  {}: scope 1-3 (Enter: 1, Esc: back) > "


@pytest.mark.parametrize(
    ("keys", "drawn", "outcome", "scope"),
    [
        (b"s2", ["s", SCOPE_LINE.format("Allow for this session") + "2"],
         "allowed-for-session", {"kind": "path", "rule": "Write(./**)"}),
        (b"xw7\r", ["w", SCOPE_LINE.format("Always allow in this workspace") + "1"],
         "allowed-always", {"kind": "exact", "rule": "Write(./t.txt)"}),
        (b"s\x1ba", ["s", SCOPE_LINE.format("Allow for this session"), CHOICES_LINE + "a"],
         "allowed-once", None),
    ],
)  # fmt: skip
def test_a_grant_takes_its_key_then_the_scopes_number(
    tmp_path: Path, keys: bytes, drawn: list[str], outcome: str, scope: dict[str, str] | None
) -> None:
    model = steps_script(tmp_path / "s.json", WRITE)
    with run_at_terminal(tmp_path, model, "--plugin", "ask_tools") as (master, store):
        shown = read_until(master, b"(default) > ")
        rest = b""
        for key in keys:  # one key at a time, as typed (a lone Escape is the Escape key)
            os.write(master, bytes([key]))
            if key in b"sw\x1b":  # each waits for what it draws: the scopes, the choices
                rest += read_until(master, b"> ")
        rest = read_until(master, b"finished", rest)
    assert (tmp_path / "ws" / "t.txt").read_text() == "t"
    (decision,) = decided(store)
    assert decision["outcome"] == outcome
    assert decision.get("scope") == scope
    said = f"{outcome}: {scope['rule']}" if scope is not None else outcome
    # the question's last line, then each line the keys drew, then the outcome
    assert question_of(shown).endswith(CHOICES_LINE)
    assert rest.startswith("\r\n".join([*drawn, f"  → {said}", ""]).encode())


def test_keys_typed_before_the_question_answer_nothing(tmp_path: Path) -> None:
    model = steps_script(tmp_path / "s.json", WRITE)
    with run_at_terminal(tmp_path, model, "--plugin", "ask_tools") as (master, store):
        os.write(master, b"aaaa")  # typed ahead: must not approve an unseen question
        read_until(master, b"(default) > ")
        os.write(master, b"r")
        read_until(master, b"finished")
    assert not (tmp_path / "ws" / "t.txt").exists()
    assert [d["outcome"] for d in decided(store)] == ["rejected"]


def test_arrow_and_function_keys_answer_nothing(tmp_path: Path) -> None:
    """A key that sends an escape sequence is one key, never its letters: the up arrow sends
    ``ESC [ A``, whose ``A`` is not the ``a`` of Allow once."""
    model = steps_script(tmp_path / "s.json", WRITE)
    keys = [b"\x1b[A", b"\x1bOA", b"\x1b[1;5A", b"\x1b[15~", b"\x1bOP", b"\x1ba", b"\x1bs"]
    with run_at_terminal(tmp_path, model, "--plugin", "ask_tools") as (master, store):
        read_until(master, b"(default) > ")
        for key in keys:  # each as the terminal sends it: in one write
            os.write(master, key)
        os.write(master, b"w")  # the grant's scope is asked for: nothing above answered
        rest = read_until(master, b"Esc: back) > ")
        os.write(master, b"\x1b")
        rest += read_until(master, b"(default) > ")
        os.write(master, b"r")
        rest += read_until(master, b"finished")
    assert not (tmp_path / "ws" / "t.txt").exists()
    assert [d["outcome"] for d in decided(store)] == ["rejected"]
    assert rest.startswith(b"w\r\n  Always allow in this workspace: scope 1-3")


def test_a_childs_question_names_the_child_and_its_lineage(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "s.json",
        [
            {
                "match": {"depth": 0},
                "steps": [
                    call(
                        "subagent",
                        description="alpha",
                        prompt="Write a.txt.",
                        run_in_background=False,
                    ),
                    {"text": "finished"},
                ],
            },
            {
                "match": {"depth": 1, "label": "alpha"},
                "steps": [call("write", path="a.txt", content="a"), {"text": "alpha done"}],
            },
        ],
    )
    with run_at_terminal(tmp_path, model, "--plugin", "root_approvals") as (master, _store):
        shown = read_until(master, b"(default) > ")
        os.write(master, b"a")
        read_until(master, b"finished")
    assert (tmp_path / "ws" / "a.txt").read_text() == "a"
    question = question_of(shown).split("\r\n")
    ids = re.fullmatch(
        r"  asked by: subagent \[alpha\] ([0-9a-f]{8}) \(depth 1\), routed to the root",
        question[2],
    )
    assert ids is not None, question
    assert re.fullmatch(rf"  lineage: \[alpha\] {ids[1]} → root [0-9a-f]{{8}}", question[3])


def test_a_question_at_the_terminal_is_answered_from_another_one(tmp_path: Path) -> None:
    model = steps_script(tmp_path / "s.json", WRITE)
    with run_at_terminal(tmp_path, model, "--plugin", "ask_tools") as (master, store):
        shown = read_until(master, b"(default) > ")
        prefix = re.findall(rb"tether approvals answer ([0-9a-f]{8}) ", shown)[-1].decode()
        answered = tether("approvals", "answer", prefix, "allow", "--store", store)
        assert answered.returncode == 0, answered.stderr
        rest = read_until(master, b"finished")
        os.write(master, b"r")  # too late: the question is closed
    (decision,) = decided(store)
    by = decision["answered_by"]
    assert re.fullmatch(rf"tether approvals answer \({USER}, pid \d+\)", by)
    assert rest.startswith(f"\r\n  → allowed-once · answered by {by}\r\n".encode())
    assert (tmp_path / "ws" / "t.txt").read_text() == "t"


def test_the_spinners_clock_ticks_while_the_run_waits_on_another_terminal(
    tmp_path: Path,
) -> None:
    model = steps_script(tmp_path / "s.json", WRITE)
    waiting = rb"root: waiting for approval of write \xc2\xb7 (\d+\.\d)s"
    with run_at_terminal(tmp_path, model, "--plugin", "ask_tools", "--approval-from", "store") as (
        master,
        store,
    ):
        shown = read_until(master, b"waiting for approval of write")
        clock: set[bytes] = set()
        while len(clock) < 3:  # the spinner redraws about ten times a second
            shown += os.read(master, 4096)
            clock = set(re.findall(waiting, shown))
        row = json.loads(tether("approvals", "list", "--store", store, "--json").stdout)[0]
        answered = tether("approvals", "answer", row["id"], "allow", "--store", store)
        assert answered.returncode == 0, answered.stderr
        read_until(master, b"finished", shown)
    assert (tmp_path / "ws" / "t.txt").read_text() == "t"
    assert len(clock) >= 3  # three different times drawn while nothing but the clock changed


def test_ctrl_c_at_the_question_interrupts_the_run_and_gives_the_terminal_back(
    tmp_path: Path,
) -> None:
    model = steps_script(tmp_path / "s.json", WRITE)
    master, slave = os.openpty()
    proc = subprocess.Popen(
        run_argv(tmp_path, model, "--plugin", "ask_tools"),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
        start_new_session=True,
        # the terminal is the run's own, so Ctrl-C there signals it
        preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
    )
    try:
        shown = read_until(master, b"(default) > ")
        single_keys = termios.tcgetattr(slave)[3]
        assert not single_keys & (termios.ICANON | termios.ECHO)  # the question takes keys
        os.write(master, b"\x03")  # Ctrl-C: the terminal sends SIGINT
        rest = read_until(master, b"tether run --resume", shown)
        assert proc.wait(timeout=30) == 130
        restored = termios.tcgetattr(slave)[3]
    finally:
        proc.kill()
        os.close(slave)
        os.close(master)
    assert restored & termios.ICANON and restored & termios.ECHO
    assert rest[len(shown) :].startswith(b"\r\n")  # the question's line was ended
    assert not (tmp_path / "ws" / "t.txt").exists()
