"""The agent layer's event payloads: one typed definition per event type it writes.

Each definition is the payload of one event type, in the shape of ``policy/_events.py``:
``to_data`` is what the agent's write path appends, key for key as it always was, so stored
logs do not change; ``from_data`` reads a stored payload and fails closed with
:class:`InvalidAgentEventError`.

Most readers of these events are lenient on purpose and use ``parse`` instead: the history
replays old and hand-edited logs, and the terminal views show what a log holds; a malformed
field there reads as its empty value (text ``""``, a count ``0``), never as an error.
``parse`` returns ``None`` where no empty value is meaningful (a turn without a number, a turn
end outside its vocabulary, a header without its text), and each reader says what that means
to it. ``from_data`` is the contract a writer must meet
(``tests/agent/test_agent_events.py`` holds the real writers to it) and the reading of a
caller that needs the event whole (the ``/compact`` report).

The session layer sits below this one and writes its own crash-repair closers
(``tool/result``, ``step/end``, ``turn/end`` in ``session/persistence/_repair.py``);
``tests/agent/test_agent_events.py`` holds them to these definitions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Final, Literal, Self, TypeAlias, TypeGuard, get_args

from tether.errors import TetherError
from tether.model import FinishReason, ToolCall, Usage
from tether.session import JsonObject, JsonValue
from tether.session._json import is_mapping
from tether.session._payload_fields import PayloadFields, is_count

StopReason: TypeAlias = Literal[
    "completed", "aborted", "error", "max-tokens", "max-steps", "blocked"
]
"""Why an agent's turn ended."""

TurnEndReason: TypeAlias = StopReason | Literal["interrupted"]
"""A ``turn/end`` reason: a stop reason, or ``interrupted`` (written by crash repair)."""

CompactTrigger: TypeAlias = Literal["auto", "manual"]
"""Who asked for a compaction: the agent before a request (``auto``), or the user
(``/compact``, ``Harness.compact``)."""

InboxTarget: TypeAlias = Literal["next-turn", "next-step", "inject"]
"""Where a queued message goes (``agent/_inbox.py``): the next turn's prompt, a steer for the
next step, or injected context."""

HeaderReason: TypeAlias = Literal["initial", "change", "resume"]
"""``initial``: the log's first header; ``change``: the system text or tools changed;
``resume``: an agent's first request over a log it did not start (a resumed session, a fork
child over its seed), written even when nothing changed, as the reference harness does."""

_TURN_END_REASONS: Final = frozenset(get_args(StopReason)) | {"interrupted"}
_FINISH_REASONS: Final = frozenset(get_args(FinishReason))
_TRIGGERS: Final = frozenset(get_args(CompactTrigger))
_TARGETS: Final = frozenset(get_args(InboxTarget))


class InvalidAgentEventError(TetherError):
    """A stored agent-layer event whose payload does not fit its definition."""

    code = "INVALID_AGENT_EVENT"


_FIELDS: Final = PayloadFields(InvalidAgentEventError)


def _choice(data: JsonObject, event_type: str, key: str, accepted: frozenset[str]) -> str:
    value = data.get(key)
    if value not in accepted:
        raise InvalidAgentEventError(
            f"{event_type} payload: {key} {value!r} is not one of {', '.join(sorted(accepted))}"
        )
    return str(value)


def _lenient_text(value: object) -> str:
    if isinstance(value, str):
        return value
    return "" if value is None else str(value)


def _lenient_optional_text(value: object) -> str | None:
    return None if value is None else _lenient_text(value)


def _lenient_int(value: object, default: int = 0) -> int:
    return value if is_count(value) else default


def _usage_data(usage: Usage) -> JsonObject:
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens}


def _usage(data: JsonObject, event_type: str) -> Usage:
    usage = _FIELDS.mapping(data, event_type, "usage")
    return Usage(
        _FIELDS.integer(usage, event_type, "prompt_tokens"),
        _FIELDS.integer(usage, event_type, "completion_tokens"),
    )


def _lenient_usage(value: object) -> Usage:
    if not is_mapping(value):
        return Usage()
    return Usage(
        _lenient_int(value.get("prompt_tokens")), _lenient_int(value.get("completion_tokens"))
    )


def _is_stop(value: object) -> TypeGuard[TurnEndReason]:
    return value in _TURN_END_REASONS


def _is_finish(value: object) -> TypeGuard[FinishReason]:
    return value in _FINISH_REASONS


def _is_trigger(value: object) -> TypeGuard[CompactTrigger]:
    return value in _TRIGGERS


def _is_target(value: object) -> TypeGuard[InboxTarget]:
    return value in _TARGETS


@dataclass(frozen=True, slots=True)
class TurnOpened:
    """``turn/start {turn}``: turn number ``turn`` (from 1) begins."""

    TYPE: ClassVar[str] = "turn/start"
    turn: int

    @classmethod
    def from_data(cls, data: JsonObject) -> Self:
        return cls(_FIELDS.integer(data, cls.TYPE, "turn"))

    @classmethod
    def parse(cls, data: JsonObject) -> Self | None:
        turn = data.get("turn")
        return cls(turn) if is_count(turn) else None

    def to_data(self) -> JsonObject:
        return {"turn": self.turn}


@dataclass(frozen=True, slots=True)
class TurnClosed:
    """``turn/end {turn, reason, cause?, error?, detail?}``: ``cause`` says who aborted an
    ``aborted`` turn, ``error`` what failed (``CODE: message``), ``detail`` why a limit or a
    gate stopped it."""

    TYPE: ClassVar[str] = "turn/end"
    turn: int
    reason: TurnEndReason
    cause: str | None = None
    error: str | None = None
    detail: str | None = None

    @classmethod
    def from_data(cls, data: JsonObject) -> Self:
        reason = data.get("reason")
        if not _is_stop(reason):
            raise InvalidAgentEventError(
                f"{cls.TYPE} payload: reason {reason!r} is not a turn end reason "
                f"(accepted: {', '.join(sorted(_TURN_END_REASONS))})"
            )
        return cls(
            _FIELDS.integer(data, cls.TYPE, "turn"),
            reason,
            _FIELDS.optional_text(data, cls.TYPE, "cause"),
            _FIELDS.optional_text(data, cls.TYPE, "error"),
            _FIELDS.optional_text(data, cls.TYPE, "detail"),
        )

    @classmethod
    def parse(cls, data: JsonObject) -> Self | None:
        """``None`` for a reason outside the vocabulary; other fields read as empty."""
        reason = data.get("reason")
        if not _is_stop(reason):
            return None
        return cls(
            _lenient_int(data.get("turn")),
            reason,
            *(_lenient_optional_text(data.get(key)) for key in ("cause", "error", "detail")),
        )

    def to_data(self) -> JsonObject:
        data: dict[str, JsonValue] = {"turn": self.turn, "reason": self.reason}
        optional = {"cause": self.cause, "error": self.error, "detail": self.detail}
        data.update({key: value for key, value in optional.items() if value is not None})
        return data


@dataclass(frozen=True, slots=True)
class StepOpened:
    """``step/start {step}``: step number ``step`` (from 1) of the open turn begins."""

    TYPE: ClassVar[str] = "step/start"
    step: int

    @classmethod
    def from_data(cls, data: JsonObject) -> Self:
        return cls(_FIELDS.integer(data, cls.TYPE, "step"))

    def to_data(self) -> JsonObject:
        return {"step": self.step}


@dataclass(frozen=True, slots=True)
class StepClosed:
    """``step/end {step, reason?}``: ``reason`` is ``interrupted`` for a step an abort, an
    error or a crash cut short."""

    TYPE: ClassVar[str] = "step/end"
    step: int
    reason: Literal["interrupted"] | None = None

    @classmethod
    def from_data(cls, data: JsonObject) -> Self:
        reason = data.get("reason")
        if reason not in (None, "interrupted"):
            raise InvalidAgentEventError(
                f"{cls.TYPE} payload: reason {reason!r} is not 'interrupted'"
            )
        return cls(
            _FIELDS.integer(data, cls.TYPE, "step"), None if reason is None else "interrupted"
        )

    def to_data(self) -> JsonObject:
        if self.reason is None:
            return {"step": self.step}
        return {"step": self.step, "reason": self.reason}


def _header_reason(reason: object) -> HeaderReason:
    return "initial" if reason == "initial" else "resume" if reason == "resume" else "change"


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """``request/header {header: {system, tools}, reason}``: the system prompt and tool names
    every later request carries, logged when they first appear and whenever they change."""

    TYPE: ClassVar[str] = "request/header"
    system: str
    tools: tuple[str, ...]
    reason: HeaderReason

    @classmethod
    def from_data(cls, data: JsonObject) -> Self:
        header = _FIELDS.mapping(data, cls.TYPE, "header")
        tools = _FIELDS.items(header, cls.TYPE, "tools")
        if not all(isinstance(t, str) for t in tools):
            raise _FIELDS.bad(cls.TYPE, "tools", "a list of tool names", tools)
        reason = _choice(data, cls.TYPE, "reason", frozenset(get_args(HeaderReason)))
        return cls(
            _FIELDS.text(header, cls.TYPE, "system"),
            tuple(str(t) for t in tools),
            _header_reason(reason),
        )

    @classmethod
    def parse(cls, data: JsonObject) -> Self | None:
        """``None`` for a header without its system text; a malformed tool list reads as
        none, a reason other than ``initial`` or ``resume`` as ``change``."""
        header = data.get("header")
        system = header.get("system") if is_mapping(header) else None
        if not is_mapping(header) or not isinstance(system, str):
            return None
        tools = header.get("tools", ())
        return cls(
            system,
            tuple(str(t) for t in tools) if isinstance(tools, list | tuple) else (),
            _header_reason(data.get("reason")),
        )

    def to_data(self) -> JsonObject:
        return {"header": {"system": self.system, "tools": list(self.tools)}, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """``assistant/message {content, reasoning?, tool_calls?, finish_reason, usage}``: one
    model reply. ``reasoning`` is stored even when empty (DeepSeek wants it sent back);
    ``tool_calls`` only when there are any."""

    TYPE: ClassVar[str] = "assistant/message"
    content: str
    finish_reason: FinishReason
    usage: Usage
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()

    @classmethod
    def from_data(cls, data: JsonObject) -> Self:
        finish = data.get("finish_reason")
        if not _is_finish(finish):
            raise InvalidAgentEventError(
                f"{cls.TYPE} payload: finish_reason {finish!r} is not a finish reason "
                f"(accepted: {', '.join(sorted(_FINISH_REASONS))})"
            )
        calls = _FIELDS.items(data, cls.TYPE, "tool_calls") if "tool_calls" in data else ()
        tool_calls = []
        for call in calls:
            if not is_mapping(call):
                raise _FIELDS.bad(cls.TYPE, "tool_calls", "a list of objects", calls)
            tool_calls.append(
                ToolCall(
                    _FIELDS.text(call, cls.TYPE, "id"),
                    _FIELDS.text(call, cls.TYPE, "name"),
                    _FIELDS.text(call, cls.TYPE, "arguments"),
                )
            )
        return cls(
            _FIELDS.text(data, cls.TYPE, "content"),
            finish,
            _usage(data, cls.TYPE),
            _FIELDS.optional_text(data, cls.TYPE, "reasoning"),
            tuple(tool_calls),
        )

    @classmethod
    def parse(cls, data: JsonObject) -> Self:
        raw_calls = data.get("tool_calls", ())
        calls = tuple(
            ToolCall(str(c.get("id")), str(c.get("name")), str(c.get("arguments")))
            for c in (raw_calls if isinstance(raw_calls, tuple | list) else ())
            if is_mapping(c)
        )
        reasoning, finish = data.get("reasoning"), data.get("finish_reason")
        return cls(
            _lenient_text(data.get("content")),
            # The model layer reads a finish reason it does not know as ``error`` too.
            finish if _is_finish(finish) else "error",
            _lenient_usage(data.get("usage")),
            reasoning if isinstance(reasoning, str) else None,
            calls,
        )

    def to_data(self) -> JsonObject:
        data: dict[str, JsonValue] = {"content": self.content}
        if self.reasoning is not None:
            data["reasoning"] = self.reasoning
        if self.tool_calls:
            data["tool_calls"] = [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in self.tool_calls
            ]
        data["finish_reason"] = self.finish_reason
        data["usage"] = _usage_data(self.usage)
        return data


@dataclass(frozen=True, slots=True)
class ToolCalled:
    """``tool/call {call_id, name, arguments}``: the agent starts one of the reply's calls;
    ``arguments`` is the model's raw JSON text."""

    TYPE: ClassVar[str] = "tool/call"
    call_id: str
    name: str
    arguments: str

    @classmethod
    def from_data(cls, data: JsonObject) -> Self:
        return cls(
            _FIELDS.text(data, cls.TYPE, "call_id"),
            _FIELDS.text(data, cls.TYPE, "name"),
            _FIELDS.text(data, cls.TYPE, "arguments"),
        )

    @classmethod
    def parse(cls, data: JsonObject) -> Self:
        return cls(
            _lenient_text(data.get("call_id")),
            _lenient_text(data.get("name")),
            # Arguments that are not text summarise as none (``args_summary`` in the chat).
            arguments if isinstance(arguments := data.get("arguments"), str) else "",
        )

    def to_data(self) -> JsonObject:
        return {"call_id": self.call_id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True, slots=True)
class ToolResulted:
    """``tool/result {call_id, name, content, is_error}``: what the model is told a call
    returned."""

    TYPE: ClassVar[str] = "tool/result"
    call_id: str
    name: str
    content: str
    is_error: bool

    @classmethod
    def from_data(cls, data: JsonObject) -> Self:
        return cls(
            _FIELDS.text(data, cls.TYPE, "call_id"),
            _FIELDS.text(data, cls.TYPE, "name"),
            _FIELDS.text(data, cls.TYPE, "content"),
            _FIELDS.boolean(data, cls.TYPE, "is_error"),
        )

    @classmethod
    def parse(cls, data: JsonObject) -> Self:
        return cls(
            _lenient_text(data.get("call_id")),
            _lenient_text(data.get("name")),
            _lenient_text(data.get("content")),
            bool(data.get("is_error")),
        )

    def to_data(self) -> JsonObject:
        return {
            "call_id": self.call_id,
            "name": self.name,
            "content": self.content,
            "is_error": self.is_error,
        }


@dataclass(frozen=True, slots=True)
class UserMessage:
    """``user/message {content, source}``: text the model reads as the user's turn. ``source``
    says where it came from (``{kind: "user"}``, a parent's task, or a plugin's record such as
    the runtime-context snapshot and the project instructions, told apart by ``plugin`` and
    ``form``)."""

    TYPE: ClassVar[str] = "user/message"
    content: str
    source: JsonObject = field(default_factory=dict)

    @classmethod
    def from_data(cls, data: JsonObject) -> Self:
        return cls(
            _FIELDS.text(data, cls.TYPE, "content"), _FIELDS.mapping(data, cls.TYPE, "source")
        )

    @classmethod
    def parse(cls, data: JsonObject) -> Self:
        source = data.get("source")
        return cls(_lenient_text(data.get("content")), source if is_mapping(source) else {})

    def to_data(self) -> JsonObject:
        return {"content": self.content, "source": self.source}

    def from_plugin(self, plugin: str | None = None, form: str | None = None) -> bool:
        """Whether ``source`` names this plugin and form (``None``: any)."""
        return (plugin is None or self.source.get("plugin") == plugin) and (
            form is None or self.source.get("form") == form
        )

    def source_text(self, key: str) -> str | None:
        value = self.source.get(key)
        return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class ContextCompacted:
    """``context/compacted {trigger, first_seq, last_seq, kept_seqs, summary, tokens_before,
    tokens_after, context_window, usage}``: the surface events ``first_seq``..``last_seq``
    (but ``kept_seqs``) are replayed as ``summary`` from now on (``agent/_history.py``)."""

    TYPE: ClassVar[str] = "context/compacted"
    trigger: CompactTrigger
    first_seq: int
    last_seq: int
    kept_seqs: tuple[int, ...]
    summary: str
    tokens_before: int
    tokens_after: int
    context_window: int | None
    usage: Usage

    @classmethod
    def from_data(cls, data: JsonObject) -> Self:
        kept = _FIELDS.items(data, cls.TYPE, "kept_seqs")
        if not all(is_count(s) for s in kept):
            raise _FIELDS.bad(cls.TYPE, "kept_seqs", "a list of seqs", kept)
        return cls(
            _trigger(data, cls.TYPE),
            _FIELDS.integer(data, cls.TYPE, "first_seq"),
            _FIELDS.integer(data, cls.TYPE, "last_seq"),
            tuple(s for s in kept if is_count(s)),
            _FIELDS.text(data, cls.TYPE, "summary"),
            _FIELDS.integer(data, cls.TYPE, "tokens_before"),
            _FIELDS.integer(data, cls.TYPE, "tokens_after"),
            _FIELDS.optional_integer(data, cls.TYPE, "context_window"),
            _usage(data, cls.TYPE),
        )

    @classmethod
    def parse(cls, data: JsonObject) -> Self:
        kept, window = data.get("kept_seqs", ()), data.get("context_window")
        trigger = data.get("trigger")
        return cls(
            trigger if _is_trigger(trigger) else "manual",
            _lenient_int(data.get("first_seq")),
            # An empty range (nothing summarised) for a payload without its end.
            _lenient_int(data.get("last_seq"), -1),
            tuple(s for s in (kept if isinstance(kept, tuple | list) else ()) if is_count(s)),
            _lenient_text(data.get("summary")),
            _lenient_int(data.get("tokens_before")),
            _lenient_int(data.get("tokens_after")),
            window if is_count(window) else None,
            _lenient_usage(data.get("usage")),
        )

    def to_data(self) -> JsonObject:
        return {
            "trigger": self.trigger,
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "kept_seqs": list(self.kept_seqs),
            "summary": self.summary,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "context_window": self.context_window,
            "usage": _usage_data(self.usage),
        }


def _trigger(data: JsonObject, event_type: str) -> CompactTrigger:
    return "auto" if _choice(data, event_type, "trigger", _TRIGGERS) == "auto" else "manual"


@dataclass(frozen=True, slots=True)
class CompactFailed:
    """``context/compact-failed {trigger, error, replied, tokens_before, context_window}``:
    a compaction that did not happen; ``replied`` when the model answered (a summary that was
    refused), so the reply counts as one the model gave."""

    TYPE: ClassVar[str] = "context/compact-failed"
    trigger: CompactTrigger
    error: str
    replied: bool
    tokens_before: int
    context_window: int | None

    @classmethod
    def from_data(cls, data: JsonObject) -> Self:
        return cls(
            _trigger(data, cls.TYPE),
            _FIELDS.text(data, cls.TYPE, "error"),
            _FIELDS.boolean(data, cls.TYPE, "replied"),
            _FIELDS.integer(data, cls.TYPE, "tokens_before"),
            _FIELDS.optional_integer(data, cls.TYPE, "context_window"),
        )

    @classmethod
    def parse(cls, data: JsonObject) -> Self:
        trigger, window = data.get("trigger"), data.get("context_window")
        return cls(
            trigger if _is_trigger(trigger) else "manual",
            _lenient_text(data.get("error")),
            data.get("replied") is True,
            _lenient_int(data.get("tokens_before")),
            window if is_count(window) else None,
        )

    def to_data(self) -> JsonObject:
        return {
            "trigger": self.trigger,
            "error": self.error,
            "replied": self.replied,
            "tokens_before": self.tokens_before,
            "context_window": self.context_window,
        }


@dataclass(frozen=True, slots=True)
class InboxSpliced:
    """``agent/inbox/spliced {target, start, inserted | removed_count}``: one item queued at
    ``start`` of queue ``target``, or ``removed_count`` items dropped from it."""

    TYPE: ClassVar[str] = "agent/inbox/spliced"
    target: InboxTarget
    start: int
    inserted: int | None = None
    removed_count: int | None = None

    @classmethod
    def from_data(cls, data: JsonObject) -> Self:
        target = data.get("target")
        if not _is_target(target):
            raise InvalidAgentEventError(
                f"{cls.TYPE} payload: target {target!r} is not an inbox queue "
                f"(accepted: {', '.join(sorted(_TARGETS))})"
            )
        inserted = _FIELDS.optional_integer(data, cls.TYPE, "inserted")
        removed = _FIELDS.optional_integer(data, cls.TYPE, "removed_count")
        if (inserted is None) == (removed is None):
            raise InvalidAgentEventError(
                f"{cls.TYPE} payload: exactly one of 'inserted' and 'removed_count' is stored"
            )
        return cls(target, _FIELDS.integer(data, cls.TYPE, "start"), inserted, removed)

    def to_data(self) -> JsonObject:
        data: dict[str, JsonValue] = {"target": self.target, "start": self.start}
        if self.inserted is not None:
            data["inserted"] = self.inserted
        if self.removed_count is not None:
            data["removed_count"] = self.removed_count
        return data


__all__ = [
    "AssistantMessage",
    "CompactFailed",
    "CompactTrigger",
    "ContextCompacted",
    "HeaderReason",
    "InboxSpliced",
    "InboxTarget",
    "InvalidAgentEventError",
    "RequestHeader",
    "StepClosed",
    "StepOpened",
    "StopReason",
    "ToolCalled",
    "ToolResulted",
    "TurnClosed",
    "TurnEndReason",
    "TurnOpened",
    "UserMessage",
]
