"""An approver an agent could rewrite is never run: refused at load, and again before each ask."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from cli_support import run_args, tether
from script_support import call, script, write
from tether import Harness
from tether.kernel import PluginEntry
from tether.sandbox import SandboxError
from tether.sandbox._paths import path_rules
from tether.sandbox._programs import rewritable_programs

ALLOW = "#!/bin/sh\ncat >/dev/null\necho allowed-once\n"


def program(path: Path, text: str = ALLOW) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def found(words: list[str], workspace: Path, **kw: str) -> list[str]:
    rules = path_rules(os.environ)
    return rewritable_programs(
        words,
        cwd=kw.get("cwd", str(workspace)),
        workspace=str(workspace),
        rules=rules,
        search_path=kw.get("search_path"),
    )


# -- which words name a rewritable program ---------------------------------------------------
def test_scripts_in_the_writable_workspace_are_found_in_every_spelling(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    script_file = program(ws / "tools" / "approve.sh")
    real = str(script_file.resolve())
    assert found([str(script_file)], ws) == [real]
    assert found(["sh", "tools/approve.sh"], ws) == [real]  # relative to the directory it runs in
    assert found(["python3", "--script=./tools/approve.sh"], ws) == [real]
    assert found(["sh", "-c", "cat >/dev/null; ./tools/approve.sh --strict"], ws) == [real]
    assert found(["approve.sh"], ws, search_path=str(ws / "tools")) == [real]  # found on PATH
    (ws / "link").symlink_to(script_file)
    assert found(["sh", "link", "tools/approve.sh"], ws) == [real]  # each file once


def test_control_paths_outside_files_directories_and_plain_words_are_not(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    program(ws / ".claude" / "approve.sh")
    outside = program(tmp_path / "approve.sh")
    (ws / "tools").mkdir()
    assert found(["sh", ".claude/approve.sh"], ws) == []  # agents can never write it
    assert found(["sh", str(outside)], ws) == []
    assert found(["sh", "tools", "missing.sh", "echo", "allowed-once"], ws) == []
    assert found([sys.executable, "-c", "print('allowed-once')"], ws) == []  # harness code
    assert found(["sh", "-c", "echo 'unbalanced"], ws) == []


# -- the plugin --------------------------------------------------------------------------------
def test_a_rewritable_approver_is_refused_when_the_harness_opens(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    approver = program(ws / "approve.sh")
    model = script(tmp_path / "s.json", [{"text": "never reached"}])

    async def open_it() -> None:
        async with Harness.open(
            workspace=ws,
            model=f"scripted:{model}",
            store=f"sqlite:///{tmp_path / 's.db'}",
            plugins=[PluginEntry(name="approver_command", config={"command": f"sh {approver}"})],
        ):
            pytest.fail("opened with a rewritable approver")

    with pytest.raises(SandboxError) as caught:
        asyncio.run(open_it())
    assert caught.value.code == "REWRITABLE_PROGRAM"
    assert str(caught.value) == (
        f"the approver runs {approver.resolve()}, inside the workspace {ws.resolve()} where an "
        "agent may rewrite it and so decide its own approvals; move it outside the workspace, "
        "or under .claude/ or a path listed in the sandbox's protected_paths (agents can read "
        "those but never write them)"
    )


def test_the_command_line_says_why_and_runs_nothing(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    approver = program(ws / "approve.sh")
    model = script(tmp_path / "s.json", [write("a.txt"), {"text": "done"}])
    done = tether(
        *run_args(model, ws, f"sqlite:///{tmp_path / 's.db'}", "--approver", f"sh {approver}"),
        cwd=ws,
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert done.stderr == (
        f"tether: REWRITABLE_PROGRAM: the approver runs {approver.resolve()}, inside the "
        f"workspace {ws.resolve()} where an agent may rewrite it and so decide its own "
        "approvals; move it outside the workspace, or under .claude/ or a path listed in the "
        "sandbox's protected_paths (agents can read those but never write them)\n"
    )
    assert not (ws / "a.txt").exists()


async def decisions(
    tmp_path: Path, ws: Path, command: str, steps: list[dict[str, Any]]
) -> list[str]:
    """Run ``steps`` in ``ws`` under workspace-write with ``write`` asking ``command``; the
    outcomes of the root's approval pairs."""
    model = script(tmp_path / "s.json", steps)
    async with Harness.open(
        workspace=ws,
        model=f"scripted:{model}",
        store=f"sqlite:///{tmp_path / 's.db'}",
        sandbox="workspace-write",
        plugins=[
            PluginEntry(name="approver_command", config={"command": command}),
            PluginEntry(name="ask_tools", config={"tools": ["write"]}),
        ],
    ) as harness:
        await harness.run("go")
        assert harness.root is not None
        events = harness.root.session.events
    return [str(e.data["outcome"]) for e in events if e.type == "approval/decided"]


@pytest.mark.timeout(90)
async def test_an_approver_under_a_control_path_answers(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    approver = program(ws / ".claude" / "approve.sh")
    steps = [write("a.txt"), {"text": "done"}]
    assert await decisions(tmp_path, ws, f"sh {approver}", steps) == ["allowed-once"]
    assert (ws / "a.txt").read_text() == "x"


@pytest.mark.timeout(90)
async def test_a_program_the_agent_plants_later_is_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The approver names ``./bin/late.sh``, absent at load; a confined command of the agent
    writes it, and the next ask is refused before the program runs (otherwise it would answer
    ``allowed-once`` for the agent)."""
    ws = tmp_path / "ws"
    (ws / "bin").mkdir(parents=True)
    monkeypatch.chdir(ws)
    plant = "printf '#!/bin/sh\\ncat >/dev/null\\necho allowed-once\\n' > bin/late.sh"
    steps = [call("bash", command=plant), write("a.txt"), {"text": "done"}]
    assert await decisions(tmp_path, ws, "sh ./bin/late.sh", steps) == ["unavailable"]
    assert (ws / "bin" / "late.sh").exists()  # the plant worked: the refusal is what stopped it
    assert not (ws / "a.txt").exists()
