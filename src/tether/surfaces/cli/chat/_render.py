"""Rich rendering of a run's events for ``tether chat``.

Every line is built as a :class:`rich.text.Text`, never as console markup: assistant text,
tool arguments and file contents come from the model or the workspace, and a ``[bold]`` in
them must print as typed. For the same reason every such text is escaped first
(:mod:`tether.kernel._printable`): a block (assistant text, a result, a diff) keeps its line
breaks and tabs, a one-line field (a tool argument, a label, a notice) keeps nothing that could
move the cursor; an escape sequence, a carriage return or a bidi override shows as ``\x1b``,
``\r``, ``\u202e``.

A child session's lines are indented by its delegation depth and prefixed with its label
(``│ [alpha] …``), so a background child's work reads apart from the root's. What is shown:

- assistant text (the final message; the streamed deltas live in the status area meanwhile),
  and the model's reasoning, dimmed;
- tool calls as ``⚙ name key=value …`` and results as ``→ first lines``; errors in red, a
  sandbox denial marker highlighted, an edit's unified diff in colour;
- a child's task, notices (a child settled, a policy changed), turn ends, permission facts;
- approval decisions the prompt did not show (it shows its own, and one from another terminal
  to a question it asked, naming who answered).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tether._harness import SessionEvent
from tether.agent._context_snapshot import is_snapshot
from tether.agent._events import (
    AssistantMessage,
    CompactFailed,
    ContextCompacted,
    ToolCalled,
    ToolResulted,
    TurnClosed,
    TurnOpened,
    UserMessage,
)
from tether.kernel._printable import printable, printable_block
from tether.policy._events import (
    ApprovalDecided,
    ApprovalPolicySet,
    PermissionPresetSet,
    SandboxModeSet,
)
from tether.policy._modes import allows
from tether.session import Event, JsonValue, Session
from tether.subagents._descriptor import fold_descriptor
from tether.subagents._events import Descriptor
from tether.subagents._visibility import SANDBOX_MARKER

ARG_VALUE_LIMIT: Final = 60
RESULT_LINES: Final = 4
DIFF_LINES: Final = 40
TEXT_LIMIT: Final = 4000
"""Characters of a subagent's reply shown inline; the root's own reply is always shown whole."""
CHAT_ANSWERER: Final = "tether chat"
"""Prefix of ``answered_by`` for approvals answered at the chat keyboard."""

CHILD_STYLE: Final = "cyan"
ERROR_STYLE: Final = "red"
DENIAL_STYLE: Final = "bold white on red"


@dataclass
class SessionInfo:
    depth: int
    parent: str | None
    label: str | None = None


@dataclass
class SessionDirectory:
    """Who each session of the run is: depth, parent and label, recorded as events are
    published (a one-shot child may be disposed before its first event is drawn)."""

    root_id: str | None = None
    sessions: dict[str, SessionInfo] = field(default_factory=dict)

    def observe(self, session: Session, event: Event) -> None:
        """A :meth:`SessionStore.on_event` listener (synchronous, called at append time)."""
        info = self.sessions.get(session.id)
        if info is None:
            header = session.header
            descriptor = fold_descriptor(session.events, header.seed_length or 0)
            info = SessionInfo(
                header.delegation_depth,
                header.parent_session,
                descriptor.label if descriptor is not None else None,
            )
            self.sessions[session.id] = info
        if event.type == Descriptor.TYPE:
            described = Descriptor.parse(event.data)
            if described is not None and described.label is not None:
                info.label = described.label

    def learn_label(self, session_id: str, label: str | None) -> None:
        if label is None:
            return
        info = self.sessions.setdefault(session_id, SessionInfo(1, None))
        info.label = label

    def depth(self, session_id: str) -> int:
        if session_id == self.root_id:
            return 0
        info = self.sessions.get(session_id)
        return info.depth if info is not None else 1

    def label(self, session_id: str) -> str:
        """The child's label (the model's description of its task: escaped), else its short
        id."""
        info = self.sessions.get(session_id)
        if info is not None and info.label:
            return printable(info.label)
        return session_id[:8]


def knob_change(kind: str, data: Mapping[str, JsonValue]) -> tuple[str, str, str | None]:
    """``(knob, value, source)`` of a ``sandbox/mode``, ``approval/policy`` or
    ``permission/preset`` event, as the chat names them."""
    if kind == SandboxModeSet.TYPE:
        mode = SandboxModeSet.from_data(data)
        return "sandbox", mode.mode.value, mode.source
    if kind == ApprovalPolicySet.TYPE:
        policy = ApprovalPolicySet.from_data(data)
        return "approval", policy.policy.value, policy.source
    return "permission preset", PermissionPresetSet.from_data(data).preset, None


def one_line(text: str, limit: int = ARG_VALUE_LIMIT) -> str:
    """``text`` escaped on one line (runs of whitespace as one space), cut at ``limit``."""
    flat = printable(" ".join(text.split()))
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def args_summary(raw: object) -> str:
    """``key=<json>`` pairs of a tool call's raw JSON arguments, each value cut short."""
    if not isinstance(raw, str):
        return ""
    try:
        value = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return one_line(raw)
    if not isinstance(value, dict):
        return one_line(raw)
    parts = []
    for key, item in value.items():
        shown = json.dumps(item, ensure_ascii=False)
        parts.append(f"{printable(key)}={one_line(shown)}")
    return " ".join(parts)


def result_text(content: str, is_error: bool) -> Text:
    """The first lines of a tool result; an error in red with the denial marker highlighted."""
    lines = printable_block(content).splitlines() or [""]
    shown = lines[:RESULT_LINES]
    text = Text()
    for index, line in enumerate(shown):
        if index:
            text.append("\n")
        style = ERROR_STYLE if is_error else "dim"
        marker = line.find(SANDBOX_MARKER)
        if marker >= 0:
            end = line.find("]", marker)
            end = len(line) if end < 0 else end + 1
            text.append(line[:marker], style=style)
            text.append(line[marker:end], style=DENIAL_STYLE)
            text.append(line[end:], style=style)
        else:
            text.append(line, style=style)
    if len(lines) > len(shown):
        text.append(f"\n… {len(lines) - len(shown)} more lines", style="dim")
    return text


def diff_text(diff: str) -> Text:
    """A unified diff, coloured, without its ``---``/``+++`` header, cut to ``DIFF_LINES``."""
    lines = [
        line for line in printable_block(diff).splitlines() if not line.startswith(("--- ", "+++ "))
    ]
    text = Text()
    for index, line in enumerate(lines[:DIFF_LINES]):
        if index:
            text.append("\n")
        if line.startswith("@@"):
            text.append(line, style="cyan")
        elif line.startswith("+"):
            text.append(line, style="green")
        elif line.startswith("-"):
            text.append(line, style="red")
        else:
            text.append(line, style="dim")
    if len(lines) > DIFF_LINES:
        text.append(f"\n… {len(lines) - DIFF_LINES} more diff lines", style="dim")
    return text


class EventRenderer:
    """Prints each event of a run as it arrives. Also tracks what the status line needs: the
    tool each session is running."""

    def __init__(
        self,
        console: Console,
        directory: SessionDirectory,
        answered_at_prompt: set[str] | None = None,
    ) -> None:
        self.console = console
        self.directory = directory
        self.answered_at_prompt = answered_at_prompt if answered_at_prompt is not None else set()
        """Ids of approvals whose answer the prompt showed (with who gave it)."""
        self.diffs: dict[tuple[str, str], str] = {}
        """(session id, call id) → the edit's diff, captured at ``tools/post-execute``."""
        self.running: dict[str, tuple[str, str]] = {}
        """session id → (call id, tool name) of the call it is executing."""
        self.live: dict[str, str] = {}
        """session id → assistant text streamed so far and not yet printed."""

    # -- streaming ------------------------------------------------------------------------------
    def on_delta(self, session_id: str, text: str) -> None:
        self.live[session_id] = self.live.get(session_id, "") + text

    def capture_diff(self, session_id: str, call_id: str, details: Mapping[str, JsonValue]) -> None:
        diff = details.get("diff")
        if isinstance(diff, str) and diff:
            self.diffs[(session_id, call_id)] = diff

    # -- printing -------------------------------------------------------------------------------
    def _prefix(self, session_id: str) -> Text:
        if session_id == self.directory.root_id:
            return Text()
        depth = max(1, self.directory.depth(session_id))
        return Text.assemble(
            ("│ " * depth, "dim"), (f"[{self.directory.label(session_id)}] ", CHILD_STYLE)
        )

    def line(self, session_id: str, body: Text) -> None:
        """Print ``body`` under the session's prefix; wrapped lines stay indented under it."""
        prefix = self._prefix(session_id)
        if not prefix.plain:
            self.console.print(body)
            return
        grid = Table.grid(padding=0)
        grid.add_column(no_wrap=True)
        grid.add_column()
        grid.add_row(prefix, body)
        self.console.print(grid)

    def render(self, item: SessionEvent) -> None:
        event, data, sid = item.event, item.event.data, item.session_id
        is_root = sid == self.directory.root_id
        kind = event.type
        if kind == AssistantMessage.TYPE:
            self._assistant(sid, AssistantMessage.parse(data))
        elif kind == UserMessage.TYPE:
            self._user(sid, event, is_root)
        elif kind == ToolCalled.TYPE:
            call = ToolCalled.parse(data)
            name = printable(call.name)
            self.running[sid] = (call.call_id, name)
            summary = args_summary(call.arguments)
            self.line(
                sid,
                Text.assemble(("⚙ ", "yellow"), (name, "bold yellow"), (" " + summary, "yellow"))
                if summary
                else Text.assemble(("⚙ ", "yellow"), (name, "bold yellow")),
            )
        elif kind == ToolResulted.TYPE:
            self._tool_result(sid, ToolResulted.parse(data))
        elif kind == ApprovalDecided.TYPE:
            self._decided(sid, data)
        elif kind == TurnOpened.TYPE:
            if not is_root:
                opened = TurnOpened.parse(data)
                number = opened.turn if opened is not None else None
                self.line(sid, Text(f"▸ turn {number}", style="dim"))
        elif kind == TurnClosed.TYPE:
            self._turn_end(sid, TurnClosed.parse(data))
        elif kind == ContextCompacted.TYPE:
            compacted = ContextCompacted.parse(data)
            if compacted.trigger == "auto":
                self.line(
                    sid,
                    Text(
                        f"context compacted: events {compacted.first_seq}-{compacted.last_seq} "
                        f"summarised (about {compacted.tokens_before} → "
                        f"{compacted.tokens_after} tokens)",
                        style="dim",
                    ),
                )
        elif kind == CompactFailed.TYPE:
            reason = printable(CompactFailed.parse(data).error)
            self.line(sid, Text(f"context compaction failed: {reason}", style="yellow"))
        elif kind in (SandboxModeSet.TYPE, ApprovalPolicySet.TYPE, PermissionPresetSet.TYPE):
            name, value, source = knob_change(kind, data)
            self.line(
                sid,
                Text(f"{name}: {value}" + (f" ({source})" if source else ""), style="magenta"),
            )

    def _assistant(self, sid: str, reply: AssistantMessage) -> None:
        content = reply.content
        streamed = self.live.pop(sid, "")
        if streamed.startswith(content) and len(streamed) > len(content):
            # The next step's deltas already arrived: keep them for the status area.
            self.live[sid] = streamed[len(content) :]
        reasoning = reply.reasoning
        if reasoning is not None and reasoning.strip():
            self.line(sid, Text("thinking: " + one_line(reasoning, 200), style="dim italic"))
        if content.strip():
            if sid == self.directory.root_id:
                self.line(sid, Text(printable_block(content)))
                return
            # A subagent's long reply is folded: its parent reads it whole, and so can the user.
            self.line(sid, Text(printable_block(content[:TEXT_LIMIT]), style=CHILD_STYLE))
            if len(content) > TEXT_LIMIT:
                rest = len(content) - TEXT_LIMIT
                self.line(
                    sid,
                    Text(f"… {rest:,} more characters (the whole reply: tether sessions show "
                         f"{sid} --json)", style="dim"),
                )  # fmt: skip

    def _user(self, sid: str, event: Event, is_root: bool) -> None:
        if is_snapshot(event):
            return
        message = UserMessage.parse(event.data)
        content = message.content
        if message.source_text("kind") == "user":
            if not is_root:  # a child's task, from its parent
                self.line(sid, Text("task: " + one_line(content, 200), style="dim"))
            return  # the root's prompt is what was just typed
        shown = message.source_text("summary") or content
        self.line(sid, Text("◂ " + one_line(shown, 300), style="blue"))

    def _tool_result(self, sid: str, result: ToolResulted) -> None:
        call_id, is_error = result.call_id, result.is_error
        if self.running.get(sid, ("", ""))[0] == call_id:
            del self.running[sid]
        body = Text("  → ", style=ERROR_STYLE if is_error else "dim")
        body.append_text(result_text(result.content, is_error))
        self.line(sid, body)
        diff = self.diffs.pop((sid, call_id), None)
        if diff is not None and not is_error:
            self.line(sid, diff_text(diff))

    def _decided(self, sid: str, data: Mapping[str, JsonValue]) -> None:
        decided = ApprovalDecided.from_data(data)
        answered_by = decided.answered_by
        if decided.id in self.answered_at_prompt or (
            answered_by is not None and answered_by.startswith(CHAT_ANSWERER)
        ):
            return  # the prompt already showed the answer
        granted = allows(decided.outcome)
        by = f" by {printable(answered_by)}" if answered_by is not None else ""
        if decided.decided_by == "rule" and decided.rule is not None:
            by = f' by {decided.rule.decision} rule "{printable(decided.rule.rule)}"'
        elif decided.decided_by == "grant" and decided.scope is not None:
            by = f" by the session grant {printable(decided.scope.describe())}"
        self.line(
            sid,
            Text(
                f"approval {decided.outcome.value}{by}",
                style="green" if granted else ERROR_STYLE,
            ),
        )

    def _turn_end(self, sid: str, end: TurnClosed | None) -> None:
        self.running.pop(sid, None)
        self.live.pop(sid, None)
        if end is None:
            # A turn/end this view cannot read still ends the turn on screen.
            self.line(sid, Text("■ turn ended (its turn/end is unreadable)", style="yellow"))
            return
        turn, reason = end.turn, end.reason
        if reason == "completed":
            if sid != self.directory.root_id:
                self.line(sid, Text(f"✓ turn {turn} completed", style="dim green"))
            return
        detail = end.cause or end.error or end.detail
        text = f"■ turn {turn} {reason}" + (f" ({printable(detail)})" if detail else "")
        self.line(sid, Text(text, style=ERROR_STYLE if reason == "error" else "yellow"))


__all__ = [
    "CHAT_ANSWERER",
    "EventRenderer",
    "SessionDirectory",
    "SessionInfo",
    "args_summary",
    "diff_text",
    "result_text",
]
