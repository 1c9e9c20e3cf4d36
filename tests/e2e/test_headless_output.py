"""``tether run -p PROMPT --output-format text|json|stream-json`` end to end: the real console
script, the scripted model, a real sandboxed bash and a real SQLite store. Every json and
stream-json line is validated against Claude Code's documented message shapes, written as a
JSON schema in ``tests/surfaces/cli/data/claude_stream_json.schema.json``."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from cli_support import tether
from script_support import call, script

pytestmark = pytest.mark.timeout(120)

SCHEMA = json.loads(
    (Path(__file__).parents[1] / "surfaces/cli/data/claude_stream_json.schema.json").read_text()
)
STEPS: list[dict[str, Any]] = [call("bash", command="echo hi"), {"text": "All done."}]


def headless(
    env: dict[str, Any], *flags: str, steps: list[dict[str, Any]] = STEPS, model: str = ""
) -> subprocess.CompletedProcess[str]:
    path = script(env["tmp"] / "script.json", steps)
    variables = {k: v for k, v in os.environ.items() if k not in ("TETHER_MODEL", "TETHER_STORE")}
    variables["XDG_CONFIG_HOME"] = str(env["tmp"] / "config")
    return tether(
        "run",
        "--model",
        model or f"scripted:{path}",
        "--workspace",
        str(env["workspace"]),
        "--store",
        env["store"],
        *flags,
        env=variables,
    )


def valid_lines(stdout: str) -> list[dict[str, Any]]:
    messages = [json.loads(line) for line in stdout.splitlines()]
    for message in messages:
        jsonschema.validate(message, SCHEMA)
    return messages


def test_stream_json_is_claude_codes_message_stream(env: dict[str, Any]) -> None:
    proc = headless(env, "--output-format", "stream-json", "-p", "say hi")
    assert proc.returncode == 0, proc.stderr
    messages = valid_lines(proc.stdout)
    assert [(m["type"], m.get("subtype")) for m in messages] == [
        ("system", "init"),
        ("assistant", None),
        ("user", None),
        ("assistant", None),
        ("result", "success"),
    ]
    init, call_message, result_message, reply, result = messages
    session = result["session_id"]
    assert {m["session_id"] for m in messages} == {session}
    assert init["cwd"] == str(env["workspace"].resolve())
    assert "bash" in init["tools"] and init["tether_sandbox"] == "workspace-write"
    [use] = call_message["message"]["content"]
    assert (use["type"], use["name"], use["input"]) == ("tool_use", "bash", {"command": "echo hi"})
    assert call_message["message"]["stop_reason"] == "tool_use"
    [block] = result_message["message"]["content"]
    assert block["tool_use_id"] == use["id"] and block["is_error"] is False
    assert block["content"].splitlines()[0] == "hi"
    assert reply["message"]["content"] == [{"type": "text", "text": "All done."}]
    assert reply["message"]["stop_reason"] == "end_turn"
    assert (result["is_error"], result["result"], result["num_turns"]) == (False, "All done.", 2)
    replies = [call_message, reply]
    assert result["usage"] == {
        "input_tokens": sum(m["message"]["usage"]["input_tokens"] for m in replies),
        "output_tokens": sum(m["message"]["usage"]["output_tokens"] for m in replies),
    }
    assert "total_cost_usd" not in result  # a scripted model has no price unless configured
    assert len({m["uuid"] for m in messages}) == len(messages)


def test_json_prints_only_the_result(env: dict[str, Any]) -> None:
    proc = headless(env, "--output-format", "json", "say hi")
    assert proc.returncode == 0, proc.stderr
    [result] = valid_lines(proc.stdout)
    assert (result["type"], result["subtype"], result["result"]) == (
        "result",
        "success",
        "All done.",
    )


def test_a_configured_price_gives_the_cost(env: dict[str, Any]) -> None:
    path = script(env["tmp"] / "script.json", STEPS)
    config = env["tmp"] / "config" / "tether"
    config.mkdir(parents=True)
    (config / "tether.toml").write_text(
        f'[models.priced]\nmodel = "scripted:{path}"\nprice = {{input = 3.0, output = 15.0}}\n'
    )
    proc = headless(env, "--output-format", "json", "-p", "say hi", model="priced")
    assert proc.returncode == 0, proc.stderr
    [result] = valid_lines(proc.stdout)
    usage = result["usage"]
    expected = (usage["input_tokens"] * 3.0 + usage["output_tokens"] * 15.0) / 1_000_000
    assert result["total_cost_usd"] == round(expected, 6)


def test_a_turn_at_its_step_limit_is_an_error_result(env: dict[str, Any]) -> None:
    proc = headless(env, "--output-format", "stream-json", "--max-steps", "1", "-p", "say hi")
    assert proc.returncode == 3
    result = valid_lines(proc.stdout)[-1]
    assert (result["subtype"], result["is_error"]) == ("error_max_turns", True)


def test_the_log_stream_result_gains_usage_duration_and_turns(env: dict[str, Any]) -> None:
    proc = headless(env, "--json", "-p", "say hi")
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    result = lines[-1]
    assert result["type"] == "run/result"
    assert set(result) == {
        "type",
        "session",
        "stop_reason",
        "output",
        "usage",
        "duration_ms",
        "num_turns",
    }
    assert result["num_turns"] == 2 and isinstance(result["duration_ms"], int)
    tokens = [line["data"]["usage"] for line in lines if line.get("type") == "assistant/message"]
    assert result["usage"] == {
        "input_tokens": sum(t["prompt_tokens"] for t in tokens),
        "output_tokens": sum(t["completion_tokens"] for t in tokens),
    }


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ("--output-format", "xml", "x"),
            "tether: run: --output-format takes text, json, stream-json\n",
        ),
        (
            ("--json", "--output-format", "json", "x"),
            "tether: run: --json prints tether's event log; give it or --output-format, not both\n",
        ),
        (("-p", "x", "y"), "tether: run: give the prompt once: as PROMPT or with -p, not both\n"),
    ],
)
def test_usage_errors(env: dict[str, Any], flags: tuple[str, ...], message: str) -> None:
    proc = headless(env, *flags)
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", message)


def test_text_prints_a_line_per_tool_call_and_the_reply(env: dict[str, Any]) -> None:
    steps = [
        call("bash", command="echo hi\x1b[2J"),
        call("write", path="notes.txt", content="x"),
        {"text": "All done."},
    ]
    proc = headless(env, "-p", "say hi", steps=steps)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "All done.\n"
    lines = proc.stderr.splitlines()
    # as each call starts, escaped on one line (the terminal never sees the escape sequence)
    assert lines[:2] == ["tether: bash: echo hi\\x1b[2J", "tether: write: notes.txt"]
    assert lines[-1].startswith("tether: 1 turn · 2 tool calls")
