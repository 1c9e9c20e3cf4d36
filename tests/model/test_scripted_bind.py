"""Scripted-model bindings: ``{{name}}`` filled from history, resume-safe."""

from __future__ import annotations

import json

import pytest

from tether.model import Message, ModelError, ModelRequest, ScriptedModel
from tether.model._client import complete


def model(bind: dict[str, str]) -> ScriptedModel:
    return ScriptedModel.from_dict(
        {
            "agents": [
                {
                    "steps": [
                        {
                            "bind": bind,
                            "tool_calls": [
                                {
                                    "name": "send_message",
                                    "arguments": {
                                        "subagent_id": "{{child}}",
                                        "message": "again {{child}}",
                                    },
                                }
                            ],
                        }
                    ]
                }
            ]
        }
    )


async def test_binding_uses_the_newest_matching_message() -> None:
    request = ModelRequest(
        messages=[
            Message.user("go"),
            Message.tool("c1", "started subagent first-id"),
            Message.tool("c2", "started subagent second-id"),
            Message.tool("c3", "unrelated"),
        ],
        session_id="s",
        step_index=0,
    )
    completion = await complete(model({"child": r"started subagent (\S+)"}), request)
    args = json.loads(completion.tool_calls[0].arguments)
    assert args == {"subagent_id": "second-id", "message": "again second-id"}


async def test_unmatched_binding_is_a_script_error() -> None:
    request = ModelRequest(messages=[Message.user("nothing here")], session_id="s", step_index=0)
    with pytest.raises(ModelError) as info:
        await complete(model({"child": r"started subagent (\S+)"}), request)
    assert info.value.code == "MODEL_SCRIPT"
    assert "binds 'child'" in str(info.value)


def test_binding_needs_a_group() -> None:
    with pytest.raises(ModelError, match="needs a capturing group"):
        model({"child": "started subagent"})
