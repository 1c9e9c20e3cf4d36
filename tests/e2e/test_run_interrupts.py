"""SIGINT and SIGTERM stop a real ``tether run`` durably: the running command is killed, the
turn's end is stored, the user is told how to resume, the exit status is 128 + the signal,
and ``tether sessions fsck`` finds nothing to repair."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from cli_support import TETHER, run_args, tether
from proc_support import gone, processes_with
from script_support import call, script

pytestmark = pytest.mark.timeout(120)


def wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    end = time.monotonic() + 60
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, "the command never started"
        time.sleep(0.05)


def stored_events(store: str, session: str) -> list[dict[str, Any]]:
    shown = tether("sessions", "show", session, "--store", store, "--json")
    assert shown.returncode == 0, shown.stderr
    return list(json.loads(shown.stdout)["events"])


@pytest.mark.parametrize(
    ("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["INT", "TERM"]
)
@pytest.mark.parametrize("output", ["text", "json"])
async def test_a_signal_ends_the_turn_durably_and_says_how_to_resume(
    tmp_path: Path, signum: signal.Signals, status: int, output: str
) -> None:
    # The long command's ``sleep`` argument: how the test finds (and proves dead) its process.
    token = f"3617.{os.getpid()}{id(tmp_path) % 10_000}"
    workspace = tmp_path / "ws"
    (workspace / "out").mkdir(parents=True)  # the workspace root itself is closed to commands
    store = f"sqlite:///{tmp_path / 's.db'}"
    model = script(
        tmp_path / "script.json",
        [
            call("bash", command=f"echo up > {workspace}/out/started; sleep {token}"),
            {"text": "never"},
        ],
    )
    args = run_args(model, workspace, store, "--sandbox", "workspace-write", prompt="go")
    if output == "text":
        args.remove("--json")
    proc = subprocess.Popen(
        [TETHER, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        wait_for(workspace / "out" / "started", proc)
        assert processes_with(token)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert await gone(token) == []
    assert proc.returncode == status, err
    listed = tether("sessions", "list", "--store", store, "--json")
    [session] = [row["id"] for row in json.loads(listed.stdout)]
    # text output names each tool call as it starts (``surfaces/cli/_tool_lines.py``)
    started = [f"tether: bash: echo up > {workspace}/out/started; sleep {token}"]
    assert err.splitlines() == [
        *(started if output == "text" else []),
        f"tether: {signum.name}: stopping the turn · press Ctrl-C again within 2s to quit at once",
        f"tether: interrupted; session {session} is stored: continue it with "
        f"`tether run --resume {session} PROMPT`",
    ]
    if output == "json":
        assert "run/result" not in out
    events = stored_events(store, session)
    [bash] = [e for e in events if e["type"] == "tool/call"]
    assert [(e["type"], e["data"]) for e in events[bash["seq"] + 1 :]] == [
        (
            "tool/result",
            {
                "call_id": bash["data"]["call_id"],
                "name": "bash",
                "content": 'Error: tool "bash" was cancelled',
                "is_error": True,
            },
        ),
        ("step/end", {"step": 1}),
        ("turn/end", {"turn": 1, "reason": "aborted", "cause": "user"}),
    ]
    assert not any(e["data"].get("repaired") for e in events)
    fsck = tether("sessions", "fsck", "--store", store)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr


DOUBLE = textwrap.dedent(
    """
    import asyncio
    from tether.surfaces.cli._interrupts import RunInterrupts

    async def main() -> None:
        with RunInterrupts(lambda: None):
            print("ready", flush=True)
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                print("stopping", flush=True)
                # A turn that is slow to close: only a second Ctrl-C ends the wait.
                await asyncio.shield(asyncio.sleep(60))

    asyncio.run(main())
    """
)


def test_a_second_ctrl_c_quits_at_once(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", DOUBLE],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGINT)
        assert proc.stdout.readline() == "stopping\n"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130
    assert err.splitlines()[-2:] == [
        "tether: SIGINT: stopping the turn · press Ctrl-C again within 2s to quit at once",
        "tether: quitting at once; the next start closes the open turn",
    ]
