"""The wire-neutral vocabulary."""

from __future__ import annotations

from typing import get_args

import pytest

from tether.errors import TetherError
from tether.model import (
    Completion,
    FinishReason,
    Message,
    ModelError,
    ModelErrorCode,
    Role,
    ToolCall,
    Usage,
)
from tether.model._types import FINISH_REASON_MEANINGS, MODEL_ERROR_CODES, ROLE_MEANINGS


def test_every_vocabulary_member_is_documented() -> None:
    assert set(ROLE_MEANINGS) == set(get_args(Role))
    assert set(FINISH_REASON_MEANINGS) == set(get_args(FinishReason))
    assert set(MODEL_ERROR_CODES) == set(get_args(ModelErrorCode))


def test_model_error_is_a_tether_error_with_a_stable_code() -> None:
    error = ModelError("key rejected", code="MODEL_AUTH", status=401)
    assert isinstance(error, TetherError)
    assert (error.code, error.status, str(error)) == ("MODEL_AUTH", 401, "key rejected")


def test_message_constructors_and_checks() -> None:
    call = ToolCall("c1", "ls", "{}")
    assert Message.assistant("x", tool_calls=[call]).tool_calls == (call,)
    assert Message.tool("c1", "out") == Message(role="tool", content="out", tool_call_id="c1")
    assert Message.user("hi", name="bob").name == "bob"
    with pytest.raises(ValueError, match="tool_call_id"):
        Message(role="tool", content="out")
    with pytest.raises(ValueError, match="only assistant"):
        Message(role="user", content="x", tool_calls=(call,))
    with pytest.raises(ValueError, match="unknown message role"):
        Message(role="robot", content="x")  # type: ignore[arg-type]


def test_completion_to_message_and_usage() -> None:
    call = ToolCall("c1", "ls", "{}")
    done = Completion("t", "r", (call,), Usage(3, 4), "tool_calls")
    assert done.to_message() == Message(
        role="assistant", content="t", reasoning="r", tool_calls=(call,)
    )
    assert done.usage.total_tokens == 7
    assert Completion("x").usage == Usage(0, 0)
