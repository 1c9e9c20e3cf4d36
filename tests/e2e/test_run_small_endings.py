"""Small endings of ``tether run``: an empty prompt is refused before anything is opened, and
a relative SQLite URL lands in the current directory, never at the filesystem root."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from cli_support import TETHER, tether
from script_support import script

pytestmark = pytest.mark.timeout(60)


def run_in(tmp_path: Path, *args: str, stdin: str | None) -> subprocess.CompletedProcess[str]:
    model = script(tmp_path / "script.json", [{"text": "done"}])
    (tmp_path / "ws").mkdir(exist_ok=True)
    return subprocess.run(
        [TETHER, "run", "--model", f"scripted:{model}", "--workspace", "ws", *args],
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=50,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "stdin", "source"),
    [
        ((), None, "stdin"),
        ((), " \n\t\n", "stdin"),
        (("",), None, "the PROMPT argument"),
        (("  \n ",), None, "the PROMPT argument"),
    ],
    ids=["devnull", "whitespace-stdin", "empty-argument", "whitespace-argument"],
)
def test_an_empty_prompt_is_refused_before_anything_is_stored(
    tmp_path: Path, args: tuple[str, ...], stdin: str | None, source: str
) -> None:
    proc = run_in(tmp_path, "--store", "sqlite:///s.db", *args, stdin=stdin)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == (
        f"tether: EMPTY_PROMPT: the prompt from {source} is empty; give the task as PROMPT or "
        "pipe it on stdin\n"
    )
    assert not (tmp_path / "s.db").exists()


@pytest.mark.parametrize("spelling", ["rel.db", "./rel.db"])
def test_a_relative_sqlite_url_is_relative_to_the_current_directory(
    tmp_path: Path, spelling: str
) -> None:
    assert not Path("/rel.db").exists()
    proc = run_in(tmp_path, "--store", f"sqlite:///{spelling}", "--json", "go", stdin=None)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "rel.db").is_file()
    assert (tmp_path / "rel.db.leases").is_dir()
    assert not Path("/rel.db").exists() and not Path("/rel.db.leases").exists()
    session = json.loads(proc.stdout.splitlines()[-1])["session"]
    listed = tether("sessions", "list", "--json", "--store", f"sqlite:///{tmp_path}/rel.db")
    assert [row["id"] for row in json.loads(listed.stdout)] == [session]
