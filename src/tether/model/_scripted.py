"""The scripted model: deterministic replies from a JSON file (``docs/design.md`` §6).

A script looks like::

    {"agents": [
        {"match": {"depth": 0},
         "steps": [
             {"tool_calls": [{"name": "read", "arguments": {"path": "a.txt"}}]},
             {"text": "Done.", "expect": "hello"}]},
        {"match": {"depth": 1, "label": "probe"},
         "steps": [{"text": "child reply", "reasoning": "optional", "finish": "stop"}]}]}

Rules:

- **Matching.** A request's session uses the first entry whose ``match`` keys (``depth``,
  ``label``, ``session`` id) all equal the request's own; an empty ``match`` matches anything.
  No matching entry is an error (``MODEL_SCRIPT``) naming the session's depth, label and id.
- **Cursor.** Each request consumes its session's next step. The step is
  ``request.step_index`` when the caller gives it, otherwise this process's cursor for
  ``request.session_id`` (the number of requests of that session it has answered). Answering
  step *n* sets the cursor to *n* + 1. ``step_index`` exists for cold resume: a fresh process
  knows nothing of earlier requests, so the agent passes the number of model replies already
  in the session's log and the script continues where it left off. ``cursor_of`` and
  ``set_cursor`` export and restore cursors for callers that track them otherwise. A step
  whose ``expect`` fails is not consumed.
- **expect.** A regular expression (``re.search``) that must match the content of the newest
  tool-role or user-role message of the request; otherwise the request fails with
  ``MODEL_SCRIPT`` naming ``agents[i].steps[j]``, the pattern and the text it saw.
- **Run-out.** After the last step the model answers ``(scripted model: no more steps)`` with
  finish reason ``stop``.
- **Output.** A step streams its reasoning and text in a few deltas, then each tool call
  (id and name first, arguments in two pieces), then the :class:`Completion`. The finish
  reason is the step's ``finish``, else ``tool_calls`` when it has tool calls, else ``stop``.
  Tool call ids are deterministic: ``call_{session_id[:8]}_{step}_{i}``. Usage is a rough
  estimate (four characters per token) so that demos show plausible numbers.
- **Bindings.** ``bind: {"child": "started subagent (\\S+)"}`` makes ``{{child}}`` in the
  step's argument strings the first group of that pattern in the newest tool or user message
  that matches it (history-derived, so it survives a cold resume). No match is
  ``MODEL_SCRIPT``.
- **Context window.** A top-level ``"context_window": N`` (tokens) makes the model claim that
  window (``ScriptedModel.context_window``), so a test can make the agent compact; a
  configured ``context_window`` (``[models.NAME]``) overrides it. Without either it has none.
- **Validation.** A malformed script (bad JSON, unknown keys, wrong types, a step with neither
  text nor tool calls, a tool call without a name, arguments that are not an object, a bad
  regular expression) fails at load with ``MODEL_SCRIPT`` naming the file and the reason.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import ClassVar, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, field_validator
from pydantic import model_validator as _model_validator

from tether._signals import AbortedError, AbortSignal
from tether.model._prices import Price
from tether.model._types import (
    Completion,
    FinishReason,
    Message,
    ModelError,
    ModelRequest,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)

NO_MORE_STEPS = "(scripted model: no more steps)"
"""The text of every reply after a session's last step."""

_SNIPPET = 300


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class ScriptMatch(_Strict):
    """Which sessions an entry serves; every given key must equal the session's own."""

    depth: int | None = Field(default=None, ge=0)
    label: str | None = None
    session: str | None = None

    def matches(self, depth: int, label: str | None, session_id: str) -> bool:
        return (
            (self.depth is None or self.depth == depth)
            and (self.label is None or self.label == label)
            and (self.session is None or self.session == session_id)
        )

    def describe(self) -> str:
        keys = self.model_dump(exclude_none=True)
        return json.dumps(keys) if keys else "{} (any session)"


class ScriptToolCall(_Strict):
    name: str = Field(min_length=1)
    arguments: dict[str, JsonValue] = Field(default_factory=dict)


class ScriptStep(_Strict):
    text: str | None = None
    reasoning: str | None = None
    tool_calls: list[ScriptToolCall] = Field(default_factory=list)
    expect: str | None = None
    finish: Literal["stop", "length"] | None = None
    bind: dict[str, str] = Field(default_factory=dict)
    """``{{name}}`` in argument strings becomes the first group of the regex ``bind[name]``
    matched against the newest tool or user message that matches it."""

    @field_validator("expect")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"invalid regular expression {value!r}: {exc}") from exc
        return value

    @field_validator("bind")
    @classmethod
    def _binds_compile(cls, value: dict[str, str]) -> dict[str, str]:
        for name, pattern in value.items():
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"bind {name!r}: invalid regular expression: {exc}") from exc
            if compiled.groups < 1:
                raise ValueError(f"bind {name!r}: the pattern needs a capturing group")
        return value

    @_model_validator(mode="after")
    def _says_something(self) -> ScriptStep:
        if self.text is None and not self.tool_calls:
            raise ValueError("a step needs text or tool_calls")
        return self


class ScriptEntry(_Strict):
    match: ScriptMatch = Field(default_factory=ScriptMatch)
    steps: list[ScriptStep]


class Script(_Strict):
    agents: list[ScriptEntry] = Field(min_length=1)
    context_window: int | None = Field(default=None, gt=0)
    """The window the scripted model claims, in tokens (tests of compaction set a small one)."""


class ScriptedModel:
    """A :class:`~tether.model._client.ModelClient` that replays a :class:`Script`."""

    NO_MORE_STEPS: ClassVar[str] = NO_MORE_STEPS

    def __init__(
        self, script: Script, *, source: str = "<script>", context_window: int | None = None
    ) -> None:
        self.script = script
        self.source = source
        self.context_window = context_window or script.context_window
        """A configured window wins over the script's own ``context_window``."""
        self.price: Price | None = None
        """A configured ``price`` (``[models.NAME]``), so a test can see a run's cost."""
        self._cursors: dict[str, int] = {}
        self._counted: dict[str, _Counted] = {}
        """The messages of each session's latest request and their size, most recent last."""

    @classmethod
    def from_path(
        cls, path: str | os.PathLike[str], *, context_window: int | None = None
    ) -> ScriptedModel:
        source = os.fspath(path)
        try:
            with open(source, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ModelError(
                f"cannot read scripted model file {source}: {reason}", code="MODEL_SCRIPT"
            ) from exc
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ModelError(
                f"invalid scripted model file {source}: not valid JSON: {exc.msg} "
                f"(line {exc.lineno}, column {exc.colno})",
                code="MODEL_SCRIPT",
            ) from exc
        return cls.from_dict(data, source=source, context_window=context_window)

    @classmethod
    def from_dict(
        cls, data: object, *, source: str = "<dict>", context_window: int | None = None
    ) -> ScriptedModel:
        try:
            script = Script.model_validate(data)
        except ValidationError as exc:
            raise ModelError(
                f"invalid scripted model file {source}: {_describe_errors(exc)}",
                code="MODEL_SCRIPT",
            ) from exc
        return cls(script, source=source, context_window=context_window)

    def __repr__(self) -> str:
        return f"ScriptedModel(source={self.source!r})"

    # -- cursors -------------------------------------------------------------------------

    def cursor_of(self, session_id: str) -> int:
        """The step the session's next request will get (without a ``step_index``)."""
        return self._cursors.get(session_id, 0)

    def set_cursor(self, session_id: str, cursor: int) -> None:
        if cursor < 0:
            raise ValueError("a cursor is >= 0")
        self._cursors[session_id] = cursor

    def cursors(self) -> dict[str, int]:
        """A copy of every session's cursor, for export."""
        return dict(self._cursors)

    # -- answering -----------------------------------------------------------------------

    def entry_for(
        self, depth: int, label: str | None, session_id: str
    ) -> tuple[int, ScriptEntry] | None:
        """The first entry whose match fits the session, with its index."""
        for index, entry in enumerate(self.script.agents):
            if entry.match.matches(depth, label, session_id):
                return index, entry
        return None

    async def stream(
        self, request: ModelRequest, signal: AbortSignal | None = None
    ) -> AsyncIterator[StreamEvent]:
        _check(signal)
        found = self.entry_for(request.depth, request.label, request.session_id)
        if found is None:
            entries = "; ".join(
                f"agents[{i}] matches {e.match.describe()}"
                for i, e in enumerate(self.script.agents)
            )
            raise ModelError(
                f"scripted model {self.source}: no entry matches session "
                f"{request.session_id!r} (depth {request.depth}, label {request.label!r}); "
                f"{entries}",
                code="MODEL_SCRIPT",
            )
        entry_index, entry = found
        if request.step_index is not None and request.step_index < 0:
            raise ModelError(
                f"scripted model {self.source}: step_index must be >= 0, got {request.step_index}",
                code="MODEL_SCRIPT",
            )
        step_index = (
            request.step_index
            if request.step_index is not None
            else self.cursor_of(request.session_id)
        )
        if step_index >= len(entry.steps):
            completion = Completion(
                text=NO_MORE_STEPS,
                usage=self._usage(request, NO_MORE_STEPS),
                finish_reason="stop",
            )
            for piece in _pieces(NO_MORE_STEPS):
                yield TextDelta(piece)
                await _pause(signal)
        else:
            step = entry.steps[step_index]
            if step.expect is not None:
                self._check_expect(request, entry_index, step_index, step.expect)
            bindings = self._bindings(request, entry_index, step_index, step.bind)
            calls = tuple(
                ToolCall(
                    id=f"call_{request.session_id[:8]}_{step_index}_{i}",
                    name=call.name,
                    arguments=json.dumps(_substitute(call.arguments, bindings), ensure_ascii=False),
                )
                for i, call in enumerate(step.tool_calls)
            )
            finish: FinishReason = step.finish or ("tool_calls" if calls else "stop")
            text = step.text or ""
            completion = Completion(
                text=text,
                reasoning=step.reasoning,
                tool_calls=calls,
                usage=self._usage(
                    request, text + (step.reasoning or "") + "".join(c.arguments for c in calls)
                ),
                finish_reason=finish,
            )
            for piece in _pieces(step.reasoning or ""):
                yield ReasoningDelta(piece)
                await _pause(signal)
            for piece in _pieces(text):
                yield TextDelta(piece)
                await _pause(signal)
            for i, call in enumerate(calls):
                half = len(call.arguments) // 2
                yield ToolCallDelta(i, call.id, call.name, call.arguments[:half])
                await _pause(signal)
                yield ToolCallDelta(i, None, None, call.arguments[half:])
                await _pause(signal)
        self._cursors[request.session_id] = step_index + 1
        yield completion

    def _usage(self, request: ModelRequest, output: str) -> Usage:
        """The rough usage estimate (four characters per token) of the module docstring.

        A session's requests repeat the history of the one before and add to it, so the size
        of the messages is kept per session and only what follows the previous request's
        messages is measured, once those are found unchanged at the start of this one (a list
        comparison, in C: the same message objects compare at once)."""
        messages = tuple(request.messages)
        counted = self._counted.pop(request.session_id, None)
        if counted is not None and messages[: len(counted.messages)] == counted.messages:
            size = counted.size + _size(messages[len(counted.messages) :])
        else:
            size = _size(messages)
        self._counted[request.session_id] = _Counted(messages, size)
        while len(self._counted) > _COUNTED_SESSIONS:
            del self._counted[next(iter(self._counted))]
        return Usage(prompt_tokens=-(-size // 4), completion_tokens=-(-len(output) // 4))

    def _bindings(
        self, request: ModelRequest, entry_index: int, step_index: int, bind: dict[str, str]
    ) -> dict[str, str]:
        """Values for ``{{name}}``, read from the request's history (so a cold-resumed session
        in a new process binds exactly as the original would have)."""
        values: dict[str, str] = {}
        inputs = [m for m in request.messages if m.role in ("tool", "user")]
        for name, pattern in bind.items():
            for message in reversed(inputs):
                found = re.search(pattern, message.content)
                if found:
                    values[name] = found.group(1)
                    break
            else:
                raise ModelError(
                    f"scripted model {self.source}: agents[{entry_index}].steps[{step_index}] "
                    f"binds {name!r} with {pattern!r}, but no tool result or user message of "
                    f"session {request.session_id!r} matches it",
                    code="MODEL_SCRIPT",
                )
        return values

    def _check_expect(
        self, request: ModelRequest, entry_index: int, step_index: int, pattern: str
    ) -> None:
        newest = _newest_input(request.messages)
        seen = newest.content if newest is not None else ""
        if re.search(pattern, seen):
            return
        if newest is None:
            saw = "no tool or user message at all"
        else:
            snippet = seen if len(seen) <= _SNIPPET else seen[:_SNIPPET] + "…"
            saw = f"{newest.role} message {snippet!r}"
        raise ModelError(
            f"scripted model {self.source}: agents[{entry_index}].steps[{step_index}] "
            f"expects {pattern!r} in the newest tool result or user message of session "
            f"{request.session_id!r}, but saw {saw}",
            code="MODEL_SCRIPT",
        )


def _substitute(value: JsonValue, bindings: dict[str, str]) -> JsonValue:
    if isinstance(value, str):
        for name, bound in bindings.items():
            value = value.replace("{{" + name + "}}", bound)
        return value
    if isinstance(value, dict):
        return {k: _substitute(v, bindings) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, bindings) for v in value]
    return value


def _newest_input(messages: Sequence[Message]) -> Message | None:
    for message in reversed(messages):
        if message.role in ("tool", "user"):
            return message
    return None


def _pieces(text: str, count: int = 3) -> list[str]:
    if not text:
        return []
    size = -(-len(text) // count)
    return [text[i : i + size] for i in range(0, len(text), size)]


@dataclass(frozen=True, slots=True)
class _Counted:
    messages: tuple[Message, ...]
    size: int
    """Their characters, tool call arguments included."""


_COUNTED_SESSIONS: Final = 2048
"""Sessions whose latest request's size is kept (the least recent goes first); a session
past it is measured whole at its next request. Above a fan-out's children, so the root, whose
history is the long one, is not pushed out by a thousand children taking turns between two of
its requests."""


def _size(messages: Sequence[Message]) -> int:
    return sum(len(m.content) + sum(len(c.arguments) for c in m.tool_calls) for m in messages)


def _check(signal: AbortSignal | None) -> None:
    if signal is not None and signal.aborted:
        raise AbortedError(signal.reason)


async def _pause(signal: AbortSignal | None) -> None:
    # Yield to the loop between deltas so that streaming interleaves like a real model.
    await asyncio.sleep(0)
    _check(signal)


def _describe_errors(exc: ValidationError) -> str:
    reasons = []
    for error in exc.errors(include_url=False):
        where = _location(error["loc"])
        kind = error["type"]
        if kind == "extra_forbidden":
            message = "unknown key"
        elif kind == "missing":
            message = "required key is missing"
        else:
            message = str(error["msg"]).removeprefix("Value error, ")
        reasons.append(f"{where}: {message}")
    return "; ".join(reasons)


def _location(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"
