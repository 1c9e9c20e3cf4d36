"""A model server that accepts the request and never answers: ``tether run`` says so after the
read timeout (``--model-timeout`` or the model's ``timeout``), and Ctrl-C during the wait ends
the turn as it does anywhere else."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cli_support import TETHER, tether
from model.fake_openai import FakeOpenAI, Reply
from tether.model._settings import user_config_path

pytestmark = pytest.mark.timeout(100)


@pytest.fixture
async def silent() -> AsyncIterator[FakeOpenAI]:
    """A server that reads each request and never sends a byte back."""
    server = FakeOpenAI(respond=lambda _: Reply(mode="hang"))
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def start_run(
    ws: Path, server: FakeOpenAI, *args: str, model: str = "openai:gpt-test"
) -> asyncio.subprocess.Process:
    env = {**os.environ, "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": server.base_url}
    return await asyncio.create_subprocess_exec(
        TETHER,
        "run",
        "--model",
        model,
        "--workspace",
        str(ws),
        "--store",
        f"sqlite:///{ws.parent / 's.db'}",
        *args,
        "hello",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )


def session_ids(store: str) -> list[str]:
    listed = tether("sessions", "list", "--json", "--store", store)
    assert listed.returncode == 0, listed.stderr
    return [row["id"] for row in json.loads(listed.stdout)]


def stored_turn_end(ws: Path) -> list[dict[str, object]]:
    store = f"sqlite:///{ws.parent / 's.db'}"
    [session] = session_ids(store)
    shown = json.loads(tether("sessions", "show", session, "--json", "--store", store).stdout)
    return [e["data"] for e in shown["events"] if e["type"] == "turn/end"]


def silent_message(server: FakeOpenAI, seconds: str) -> str:
    return (
        f"MODEL_TIMEOUT: openai ({server.base_url}/chat/completions) accepted the request but "
        f"sent nothing for {seconds}; not retried, as it may still be working on it. For a slow "
        "model raise the read timeout: --model-timeout SECONDS or timeout in its [models.NAME] "
        "table"
    )


async def test_model_timeout_says_the_server_accepted_and_sent_nothing(
    ws: Path, silent: FakeOpenAI
) -> None:
    proc = await start_run(ws, silent, "--model-timeout", "0.5")
    out, err = await proc.communicate()
    assert proc.returncode == 1
    assert out == b""
    assert err.decode().splitlines()[-1] == (
        f"tether: run: the turn ended error: {silent_message(silent, '0.5 s')}"
    )
    assert len(silent.requests) == 1
    assert stored_turn_end(ws) == [
        {"turn": 1, "reason": "error", "error": silent_message(silent, "0.5 s")}
    ]


@pytest.mark.parametrize(
    ("args", "seconds"), [((), "0.25 s"), (("--model-timeout", "0.5"), "0.5 s")]
)
async def test_the_configured_timeout_applies_and_the_flag_wins(
    ws: Path, silent: FakeOpenAI, args: tuple[str, ...], seconds: str
) -> None:
    path = user_config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('[models.slow]\nmodel = "openai:gpt-test"\ntimeout = 0.25\n')
    proc = await start_run(ws, silent, *args, model="slow")
    _, err = await proc.communicate()
    assert proc.returncode == 1
    assert err.decode().splitlines()[-1] == (
        f"tether: run: the turn ended error: {silent_message(silent, seconds)}"
    )


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "inf"])
def test_a_model_timeout_that_is_not_a_positive_number_is_a_usage_error(bad: str) -> None:
    ran = tether("run", "--model-timeout", bad, "hello")
    assert ran.returncode == 2
    assert ran.stderr == "tether: run: --model-timeout takes a number of seconds above 0\n"


async def test_ctrl_c_while_the_model_is_silent_ends_the_turn(ws: Path, silent: FakeOpenAI) -> None:
    proc = await start_run(ws, silent, "--json")
    await asyncio.wait_for(silent.request_seen.wait(), 60)
    proc.send_signal(signal.SIGINT)
    out, err = await proc.communicate()
    assert proc.returncode == 130
    store = f"sqlite:///{ws.parent / 's.db'}"
    [session] = session_ids(store)
    assert err.decode().splitlines() == [
        "tether: SIGINT: stopping the turn · press Ctrl-C again within 2s to quit at once",
        f"tether: interrupted; session {session} is stored: continue it with "
        f"`tether run --resume {session} PROMPT`",
    ]
    assert b"run/result" not in out
    assert stored_turn_end(ws) == [{"turn": 1, "reason": "aborted", "cause": "user"}]
    await asyncio.wait_for(silent.client_gone.wait(), 30)
    assert tether("sessions", "fsck", "--store", store).returncode == 0
