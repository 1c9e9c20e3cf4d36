"""``tether approvals answer`` on its fast path: which command lines take it, and that answering
a waiting approval loads neither the command-line framework, nor the event loop, nor a store."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from answer_support import start_waiter
from tether.session._answer_box import AnswerBox
from tether.surfaces.cli._answer_command import parse

HEAVY = ("typer", "click", "rich", "asyncio", "pydantic", "sqlite3", "tether.session._store")


@pytest.mark.parametrize(
    ("argv", "parsed"),
    [
        (["approvals", "answer", "ab12", "allow"], ("ab12", "allow", None)),
        (
            ["approvals", "answer", "ab12", "reject", "--store", "sqlite:///s.db"],
            ("ab12", "reject", "sqlite:///s.db"),
        ),
        (
            ["approvals", "answer", "--store=jsonl:///d", "ab12", "allow"],
            ("ab12", "allow", "jsonl:///d"),
        ),
        (["approvals", "answer", "ab12", "allow-session"], ("ab12", "allow-session", None)),
        (["approvals", "answer", "ab12", "allow-always"], ("ab12", "allow-always", None)),
        # everything else goes to the usual command line (help, usage errors)
        (["approvals", "answer", "ab12", "maybe"], None),
        (["approvals", "answer", "ab12", "allowed-once"], None),  # the words, not the outcomes
        (["approvals", "answer", "ab12"], None),
        (["approvals", "answer", "ab12", "allow", "extra"], None),
        (["approvals", "answer", "ab12", "allow", "--store"], None),
        (["approvals", "answer", "--help"], None),
        (["approvals", "answer", "ab12", "allow", "-h"], None),
        (["approvals", "list"], None),
        (["--version"], None),
        ([], None),
    ],
)
def test_only_the_exact_command_takes_the_fast_path(
    argv: list[str], parsed: tuple[str, str, str | None] | None
) -> None:
    assert parse(argv) == parsed


ANSWER = """
import json, sys
sys.argv = ["tether", "approvals", "answer", sys.argv[1], sys.argv[3], "--store", sys.argv[2]]
from tether.surfaces.cli._app import main
status = "returned"
try:
    main()
except SystemExit as done:
    status = done.code
print(json.dumps({"status": status, "loaded": sorted(sys.modules)}), file=sys.stderr)
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("word", "outcome"), [("allow", "allowed-once"), ("allow-session", "allowed-for-session")]
)
def test_answering_a_waiting_approval_loads_no_framework_loop_or_store(
    tmp_path: Path, word: str, outcome: str
) -> None:
    store = f"sqlite:///{tmp_path / 's.db'}"
    box = AnswerBox.for_store(store)
    approval_id = str(uuid.uuid4())
    waiter = start_waiter(box, approval_id)
    try:
        answered = subprocess.run(
            [sys.executable, "-c", ANSWER, approval_id[:8], store, word],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        out, _ = waiter.communicate(timeout=30)
    finally:
        waiter.kill()
    report = json.loads(answered.stderr.splitlines()[-1])
    assert report["status"] == 0
    got, by = json.loads(out)["answer"][:2]
    assert got == outcome
    assert answered.stdout == f"{approval_id}: {outcome} (recorded as answered by {by})\n"
    assert [m for m in report["loaded"] if m.split(".")[0] in HEAVY or m in HEAVY] == []
