"""The scripted model (``docs/design.md`` §6)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tether._signals import AbortedError, AbortSignal
from tether.model import (
    Completion,
    Message,
    ModelClient,
    ModelError,
    ModelRequest,
    ReasoningDelta,
    ScriptedModel,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
)
from tether.model._client import complete
from tether.model._scripted import NO_MORE_STEPS

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "scripted"


def req(
    *messages: Message,
    session: str = "sess-0000-aaaa",
    depth: int = 0,
    label: str | None = None,
    step_index: int | None = None,
) -> ModelRequest:
    return ModelRequest(
        messages=list(messages) or [Message.user("go")],
        session_id=session,
        depth=depth,
        label=label,
        step_index=step_index,
    )


def model(*agents: dict[str, Any]) -> ScriptedModel:
    return ScriptedModel.from_dict({"agents": list(agents)})


async def text_of(m: ScriptedModel, request: ModelRequest) -> str:
    return (await complete(m, request)).text


async def events_of(m: ScriptedModel, request: ModelRequest) -> list[StreamEvent]:
    return [e async for e in m.stream(request)]


def test_is_a_model_client() -> None:
    assert isinstance(model({"steps": []}), ModelClient)


# -- matching -------------------------------------------------------------------------------


async def test_first_matching_entry_wins() -> None:
    m = model(
        {"match": {"depth": 1, "label": "probe"}, "steps": [{"text": "probe child"}]},
        {"match": {"depth": 1}, "steps": [{"text": "any child"}]},
        {"match": {"session": "special"}, "steps": [{"text": "special session"}]},
        {"match": {}, "steps": [{"text": "fallback"}]},
        {"match": {"depth": 0}, "steps": [{"text": "never reached"}]},
    )
    assert await text_of(m, req(session="a", depth=1, label="probe")) == "probe child"
    assert await text_of(m, req(session="b", depth=1, label="other")) == "any child"
    assert await text_of(m, req(session="c", depth=1)) == "any child"
    assert await text_of(m, req(session="special", depth=0)) == "special session"
    assert await text_of(m, req(session="d", depth=0)) == "fallback"


async def test_all_match_keys_must_be_equal() -> None:
    m = model({"match": {"depth": 2, "label": "x", "session": "s"}, "steps": [{"text": "hit"}]})
    for request in (
        req(session="s", depth=2, label="y"),
        req(session="s", depth=1, label="x"),
        req(session="t", depth=2, label="x"),
    ):
        with pytest.raises(ModelError):
            await complete(m, request)
    assert await text_of(m, req(session="s", depth=2, label="x")) == "hit"


async def test_no_matching_entry_names_the_session() -> None:
    m = model({"match": {"depth": 0}, "steps": [{"text": "root"}]})
    with pytest.raises(ModelError) as info:
        await complete(m, req(session="child-123", depth=1, label="probe"))
    assert info.value.code == "MODEL_SCRIPT"
    text = str(info.value)
    assert "'child-123'" in text
    assert "depth 1" in text
    assert "label 'probe'" in text
    assert 'agents[0] matches {"depth": 0}' in text


# -- cursors --------------------------------------------------------------------------------


async def test_each_session_has_its_own_cursor() -> None:
    m = model({"steps": [{"text": "one"}, {"text": "two"}, {"text": "three"}]})
    assert await text_of(m, req(session="a")) == "one"
    assert await text_of(m, req(session="b")) == "one"
    assert await text_of(m, req(session="a")) == "two"
    assert await text_of(m, req(session="a")) == "three"
    assert await text_of(m, req(session="b")) == "two"
    assert m.cursor_of("a") == 3
    assert m.cursor_of("b") == 2
    assert m.cursor_of("never") == 0
    assert m.cursors() == {"a": 3, "b": 2}


async def test_run_out_answers_a_fixed_text() -> None:
    m = model({"steps": [{"text": "only"}]})
    assert await text_of(m, req()) == "only"
    for _ in range(2):
        result = await complete(m, req())
        assert result.text == NO_MORE_STEPS == "(scripted model: no more steps)"
        assert result.finish_reason == "stop"
        assert result.tool_calls == ()


async def test_set_cursor_restores_a_position() -> None:
    m = model({"steps": [{"text": "one"}, {"text": "two"}]})
    m.set_cursor("a", 1)
    assert await text_of(m, req(session="a")) == "two"
    with pytest.raises(ValueError):
        m.set_cursor("a", -1)


async def test_step_index_overrides_the_cursor() -> None:
    m = model({"steps": [{"text": "one"}, {"text": "two"}, {"text": "three"}]})
    # A fresh process resuming a session that already has one model reply in its log.
    assert await text_of(m, req(session="a", step_index=1)) == "two"
    assert m.cursor_of("a") == 2
    assert await text_of(m, req(session="a")) == "three"
    assert await text_of(m, req(session="a", step_index=0)) == "one"
    assert await text_of(m, req(session="a", step_index=7)) == NO_MORE_STEPS
    with pytest.raises(ModelError) as info:
        await complete(m, req(session="a", step_index=-1))
    assert info.value.code == "MODEL_SCRIPT"


# -- output ---------------------------------------------------------------------------------


async def test_tool_call_step_streams_deterministic_ids() -> None:
    m = model(
        {
            "steps": [
                {"text": "noop"},
                {
                    "tool_calls": [
                        {"name": "read", "arguments": {"path": "a.txt"}},
                        {"name": "ls"},
                    ]
                },
            ]
        }
    )
    await complete(m, req(session="0123456789abcdef"))
    events = await events_of(m, req(session="0123456789abcdef"))
    read_args = '{"path": "a.txt"}'
    assert events == [
        ToolCallDelta(0, "call_01234567_1_0", "read", read_args[:8]),
        ToolCallDelta(0, None, None, read_args[8:]),
        ToolCallDelta(1, "call_01234567_1_1", "ls", "{"),
        ToolCallDelta(1, None, None, "}"),
        Completion(
            text="",
            tool_calls=(
                ToolCall("call_01234567_1_0", "read", read_args),
                ToolCall("call_01234567_1_1", "ls", "{}"),
            ),
            usage=events[-1].usage,  # type: ignore[union-attr]
            finish_reason="tool_calls",
        ),
    ]


async def test_text_and_reasoning_stream_in_pieces() -> None:
    text = "The sandbox denied the write."
    m = model({"steps": [{"reasoning": "Think first.", "text": text, "finish": "length"}]})
    events = await events_of(m, req())
    reasoning = [e.text for e in events if isinstance(e, ReasoningDelta)]
    pieces = [e.text for e in events if isinstance(e, TextDelta)]
    assert "".join(reasoning) == "Think first."
    assert "".join(pieces) == text
    assert len(pieces) > 1
    final = events[-1]
    assert isinstance(final, Completion)
    assert (final.text, final.reasoning, final.finish_reason) == (text, "Think first.", "length")
    assert final.usage.completion_tokens > 0
    # reasoning, then text, then the completion
    kinds = [type(e).__name__ for e in events]
    assert kinds == sorted(kinds, key=["ReasoningDelta", "TextDelta", "Completion"].index)


async def test_explicit_finish_overrides_tool_calls_default() -> None:
    m = model({"steps": [{"tool_calls": [{"name": "ls", "arguments": {}}], "finish": "stop"}]})
    assert (await complete(m, req())).finish_reason == "stop"


# -- expect ---------------------------------------------------------------------------------


async def test_expect_matches_the_newest_tool_result() -> None:
    m = model({"steps": [{"text": "first"}, {"text": "Done.", "expect": r"denied|refused"}]})
    await complete(m, req(Message.user("write x")))
    history = [
        Message.user("write x"),
        Message.assistant("", tool_calls=[ToolCall("c1", "write", "{}")]),
        Message.tool("c1", "Error: the sandbox denied the write"),
    ]
    assert await text_of(m, req(*history)) == "Done."


async def test_expect_matches_the_newest_user_message() -> None:
    m = model({"steps": [{"text": "hi", "expect": "^hello"}]})
    assert await text_of(m, req(Message.system("hello sys"), Message.user("hello there"))) == "hi"


async def test_expect_failure_names_step_pattern_and_text() -> None:
    m = model(
        {"match": {"depth": 0}, "steps": [{"text": "x"}]},
        {
            "match": {"depth": 1},
            "steps": [{"text": "first"}, {"text": "Done.", "expect": "denied"}],
        },
    )
    await complete(m, req(session="kid", depth=1))
    long_result = "written ok " + "y" * 1000
    history = [
        Message.user("do it"),
        Message.assistant("", tool_calls=[ToolCall("c1", "write", "{}")]),
        Message.tool("c1", long_result),
    ]
    with pytest.raises(ModelError) as info:
        await complete(m, req(*history, session="kid", depth=1))
    error = info.value
    assert error.code == "MODEL_SCRIPT"
    text = str(error)
    assert "agents[1].steps[1]" in text
    assert "'denied'" in text
    assert "tool message 'written ok yyy" in text
    assert "y" * 400 not in text  # truncated
    assert "'kid'" in text
    # the failed step was not consumed
    assert m.cursor_of("kid") == 1


async def test_expect_does_not_look_past_the_newest_message() -> None:
    m = model({"steps": [{"text": "ok", "expect": "denied"}]})
    history = [Message.tool("c0", "denied"), Message.user("anything else")]
    with pytest.raises(ModelError) as info:
        await complete(m, req(*history))
    assert "user message 'anything else'" in str(info.value)


async def test_expect_with_no_input_message() -> None:
    m = model({"steps": [{"text": "ok", "expect": "x"}]})
    with pytest.raises(ModelError) as info:
        await complete(m, req(Message.system("only a system prompt")))
    assert "no tool or user message" in str(info.value)


# -- cancellation ---------------------------------------------------------------------------


async def test_aborted_signal_stops_the_stream() -> None:
    m = model({"steps": [{"text": "a long answer in several pieces"}]})
    signal = AbortSignal()
    seen: list[StreamEvent] = []
    with pytest.raises(AbortedError):
        async for event in m.stream(req(), signal):
            seen.append(event)
            signal.abort("stop")
    assert len(seen) == 1
    assert m.cursor_of("sess-0000-aaaa") == 0


# -- loading --------------------------------------------------------------------------------


def write(tmp_path: Path, content: str | dict[str, Any]) -> Path:
    path = tmp_path / "script.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def load_error(path: Path) -> str:
    with pytest.raises(ModelError) as info:
        ScriptedModel.from_path(path)
    assert info.value.code == "MODEL_SCRIPT"
    message = str(info.value)
    assert str(path) in message
    return message


def test_load_from_path(tmp_path: Path) -> None:
    path = write(tmp_path, {"agents": [{"steps": [{"text": "hi"}]}]})
    m = ScriptedModel.from_path(path)
    assert m.source == str(path)
    assert m.script.agents[0].steps[0].text == "hi"


def test_missing_file(tmp_path: Path) -> None:
    assert "No such file or directory" in load_error(tmp_path / "nope.json")


def test_bad_json(tmp_path: Path) -> None:
    message = load_error(write(tmp_path, '{"agents": [\n  {"steps": [}]}'))
    assert "not valid JSON" in message
    assert "line 2" in message


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        ([], "(top level): Input should be a valid dictionary"),
        ({}, "agents: required key is missing"),
        ({"agents": []}, "agents: List should have at least 1 item"),
        ({"agents": [], "extra": 1}, "extra: unknown key"),
        ({"agents": [{"steps": [], "name": "x"}]}, "agents[0].name: unknown key"),
        ({"agents": [{"match": {"depth": 0}}]}, "agents[0].steps: required key is missing"),
        ({"agents": [{"match": {"role": "x"}, "steps": []}]}, "agents[0].match.role: unknown key"),
        (
            {"agents": [{"match": {"depth": "0"}, "steps": []}]},
            "agents[0].match.depth: Input should be a valid integer",
        ),
        (
            {"agents": [{"match": {"depth": True}, "steps": []}]},
            "agents[0].match.depth: Input should be a valid integer",
        ),
        (
            {"agents": [{"match": {"depth": -1}, "steps": []}]},
            "agents[0].match.depth: Input should be greater than or equal to 0",
        ),
        (
            {"agents": [{"steps": [{"text": "a", "tool": []}]}]},
            "agents[0].steps[0].tool: unknown key",
        ),
        (
            {"agents": [{"steps": [{"text": 5}]}]},
            "agents[0].steps[0].text: Input should be a valid string",
        ),
        (
            {"agents": [{"steps": [{"text": "a"}, {"expect": "x"}]}]},
            "agents[0].steps[1]: a step needs text or tool_calls",
        ),
        (
            {"agents": [{"steps": [{"tool_calls": [{"arguments": {}}]}]}]},
            "agents[0].steps[0].tool_calls[0].name: required key is missing",
        ),
        (
            {"agents": [{"steps": [{"tool_calls": [{"name": ""}]}]}]},
            "agents[0].steps[0].tool_calls[0].name: String should have at least 1 character",
        ),
        (
            {"agents": [{"steps": [{"tool_calls": [{"name": "ls", "arguments": "{}"}]}]}]},
            "agents[0].steps[0].tool_calls[0].arguments: Input should be a valid dictionary",
        ),
        (
            {"agents": [{"steps": [{"tool_calls": [{"name": "ls", "arguments": [1]}]}]}]},
            "agents[0].steps[0].tool_calls[0].arguments: Input should be a valid dictionary",
        ),
        (
            {"agents": [{"steps": [{"tool_calls": {"name": "ls"}}]}]},
            "agents[0].steps[0].tool_calls: Input should be a valid list",
        ),
        (
            {"agents": [{"steps": [{"text": "a", "expect": "(unclosed"}]}]},
            "agents[0].steps[0].expect: invalid regular expression '(unclosed': missing )",
        ),
        (
            {"agents": [{"steps": [{"text": "a", "finish": "tool_calls"}]}]},
            "agents[0].steps[0].finish: Input should be 'stop' or 'length'",
        ),
    ],
)
def test_malformed_scripts_fail_at_load(tmp_path: Path, script: Any, reason: str) -> None:
    message = load_error(write(tmp_path, script))
    assert reason in message


def test_from_dict_names_its_source() -> None:
    with pytest.raises(ModelError) as info:
        ScriptedModel.from_dict({"agents": "x"}, source="inline test script")
    assert "invalid scripted model file inline test script: agents:" in str(info.value)


# -- the example scripts --------------------------------------------------------------------


def test_every_example_script_loads() -> None:
    paths = sorted(EXAMPLES.glob("*.json"))
    assert paths
    for path in paths:
        ScriptedModel.from_path(path)


async def test_architecture_example_flow() -> None:
    m = ScriptedModel.from_path(EXAMPLES / "delegation-probe.json")
    root = await complete(m, req(Message.user("probe the sandbox"), session="root"))
    assert root.finish_reason == "tool_calls"
    assert root.tool_calls[0].name == "subagent"
    assert json.loads(root.tool_calls[0].arguments) == {
        "description": "probe",
        "prompt": "write x",
        "run_in_background": False,
    }
    child = await complete(m, req(Message.user("write x"), session="child", depth=1, label="probe"))
    assert child.tool_calls[0].name == "write"
    child_history = [
        Message.user("write x"),
        child.to_message(),
        Message.tool(child.tool_calls[0].id, "Error: denied by sandbox (read-only)"),
    ]
    child_done = await complete(m, req(*child_history, session="child", depth=1, label="probe"))
    assert child_done.text == "The sandbox denied the write."
    root_history = [
        Message.user("probe the sandbox"),
        root.to_message(),
        Message.tool(root.tool_calls[0].id, child_done.text),
    ]
    assert await text_of(m, req(*root_history, session="root")) == "Done."


async def test_usage_counts_the_whole_request_as_a_history_grows_and_is_rewritten() -> None:
    # Four characters a token, over every message's text and tool call arguments: a request
    # that extends the previous one is counted as a whole, as is one whose history was
    # rewritten (compacted) and one of a session the model has not seen.
    m = model({"steps": [{"text": "a"}, {"text": "b"}, {"text": "c"}, {"text": "d"}]})
    call = ToolCall("call_1", "read", '{"path": "notes.txt"}')
    first = [Message.user("x" * 10)]
    second = [*first, Message.assistant("y" * 7, tool_calls=(call,)), Message.tool("call_1", "z")]
    rewritten = [Message.user("summary"), Message.user("w" * 3)]

    async def prompt_tokens(messages: list[Message], session: str = "sess-0000-aaaa") -> int:
        return (await complete(m, req(*messages, session=session))).usage.prompt_tokens

    assert await prompt_tokens(first) == 3  # 10 characters
    assert await prompt_tokens(second) == 10  # 10 + 7 + 21 + 1 = 39 characters
    assert await prompt_tokens(rewritten) == 3  # 7 + 3
    assert await prompt_tokens(second, session="other") == 10
