"""Hostile inputs through ``tether run``, as an attacker-controlled model would send them: a
catastrophic ``grep`` pattern, names on disk that are not UTF-8, and lone surrogates in model
text and tool-call arguments (from the scripted model and from an OpenAI-compatible server).
Each run must end on its own, without a traceback, with everything it did in the log."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from e2e_support import JsonRun, stored

from cli_support import TETHER, run_args, tether
from model.fake_openai import FakeOpenAI, Reply, chunk, sse
from script_support import call, script

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def env(ws: Path, tmp_path: Path) -> dict[str, Any]:
    return {"workspace": ws, "store": f"sqlite:///{tmp_path / 'store.db'}", "tmp": tmp_path}


def run_json(env: dict[str, Any], steps: list[dict[str, Any]]) -> JsonRun:
    model = script(env["tmp"] / "script.json", steps)
    return JsonRun(
        tether(*run_args(model, env["workspace"], env["store"], "--sandbox", "read-only"))
    )


def results(run: JsonRun) -> list[str]:
    return [r["content"] for r in run.of_type(run.root, "tool/result")]


def test_a_catastrophic_grep_pattern_ends_as_an_error_the_model_reads(
    env: dict[str, Any],
) -> None:
    (env["workspace"] / "big.txt").write_text("a" * 5000 + "!\n")
    run = run_json(env, [call("grep", pattern="(a+)+$"), {"text": "understood"}])
    assert run.proc.returncode == 0, run.proc.stderr
    assert "Traceback" not in run.proc.stderr
    assert results(run) == [
        "Error: the regular expression (a+)+$ is too expensive: matching it against line 1 of "
        "big.txt took longer than 1 s. Use a simpler pattern (nested repetition such as (a+)+ "
        "or (x|x)* backtracks exponentially), a narrower path or glob, or literal=true to "
        "search for the plain text."
    ]
    assert run.result["stop_reason"] == "completed"


def test_ctrl_c_during_a_long_grep_ends_the_run(env: dict[str, Any]) -> None:
    """Each line backtracks for a while (well under the per-match budget), so the search
    would run for its whole budget; Ctrl-C must end the run instead. Without the search
    seeing the abort, ``communicate`` below times out."""
    (env["workspace"] / "slow.txt").write_text(("a" * 24 + "!\n") * 2000)
    model = script(env["tmp"] / "script.json", [call("grep", pattern="(a|aa)*$")])
    args = run_args(model, env["workspace"], env["store"], "--sandbox", "read-only")
    proc = subprocess.Popen(
        [TETHER, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if json.loads(line)["type"] == "tool/call":
                break
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
    assert "Traceback" not in err


def test_names_that_are_not_utf8_are_listed_escaped_and_readable(env: dict[str, Any]) -> None:
    ws = os.fsencode(env["workspace"])
    fd = os.open(ws + b"/\xff\xfe.txt", os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, b"hello\n")
    os.close(fd)
    os.symlink(b"target\xfe", ws + b"/link")
    run = run_json(
        env,
        [
            {
                "tool_calls": [
                    {"name": "ls", "arguments": {}},
                    {"name": "glob", "arguments": {"pattern": "*.txt"}},
                    {"name": "grep", "arguments": {"pattern": "hello"}},
                    {"name": "read", "arguments": {"path": "\\xff\\xfe.txt"}},
                ]
            },
            {"text": "listed"},
        ],
    )
    assert run.proc.returncode == 0, run.proc.stderr
    assert "Traceback" not in run.proc.stderr
    assert results(run) == [
        "\\xff\\xfe.txt\nlink -> target\\xfe",
        "\\xff\\xfe.txt",
        "\\xff\\xfe.txt:1:hello",
        "hello\n",
    ]
    kept = [e["data"]["content"] for e in stored(env, run.root) if e["type"] == "tool/result"]
    assert kept == results(run)


def test_lone_surrogates_from_the_model_are_replaced_before_the_log(env: dict[str, Any]) -> None:
    # The script's JSON carries the escapes "\ud800" and "\udcff" (json.dumps writes them so).
    run = run_json(
        env,
        [
            {
                "text": "look \ud800",
                "tool_calls": [{"name": "ls", "arguments": {"path": "\udcff"}}],
            },
            {"text": "done \ud800 ok"},
        ],
    )
    assert run.proc.returncode == 0, run.proc.stderr
    assert "Traceback" not in run.proc.stderr
    assert json.loads(run.proc.stdout.splitlines()[-1])["output"] == "done \ufffd ok"
    replies = run.of_type(run.root, "assistant/message")
    assert [r["content"] for r in replies] == ["look \ufffd", "done \ufffd ok"]
    assert run.of_type(run.root, "tool/call")[0]["arguments"] == '{"path": "\ufffd"}'
    assert results(run) == ["Error: directory not found: \ufffd"]
    assert run.result["output"] == "done \ufffd ok"


async def test_lone_surrogate_escapes_streamed_by_a_server_are_replaced(
    env: dict[str, Any],
) -> None:
    server = FakeOpenAI()
    await server.start()
    server.add(
        Reply(
            pieces=sse(
                chunk({"role": "assistant", "reasoning_content": "think \ud800"}),
                chunk({"content": "bad \ud800 text"}),
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call-\udcff",
                                "function": {
                                    "name": "ls",
                                    "arguments": json.dumps({"path": "x\ud800"}),
                                },
                            }
                        ]
                    }
                ),
                chunk(finish="tool_calls"),
            )
        ),
        Reply(pieces=sse(chunk({"content": "end \udc80"}), chunk(finish="stop"))),
    )
    process_env = {**os.environ, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-test"}
    args = run_args("x", env["workspace"], env["store"], "--sandbox", "read-only")
    args[args.index("--model") + 1] = "openai:gpt-test"
    try:
        # In a thread: the fake server answers on this loop while the process runs.
        proc = await asyncio.to_thread(
            subprocess.run,
            [TETHER, *args],
            env=process_env,
            capture_output=True,
            text=True,
            timeout=100,
            check=False,
        )
    finally:
        await server.stop()
    run = JsonRun(proc)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    first, last = run.of_type(run.root, "assistant/message")
    assert (first["content"], first["reasoning"]) == ("bad \ufffd text", "think \ufffd")
    assert first["tool_calls"] == [
        {"id": "call-\ufffd", "name": "ls", "arguments": '{"path": "x\ufffd"}'}
    ]
    assert last["content"] == "end \ufffd"
    assert results(run) == ["Error: directory not found: x\ufffd"]
    # What the server was sent back is what the log holds.
    resent = server.requests[1].body["messages"]
    assert [m["content"] for m in resent if m["role"] == "tool"] == results(run)
    events = stored(env, run.root)
    assert [e["data"] for e in events if e["type"] == "assistant/message"] == [first, last]
