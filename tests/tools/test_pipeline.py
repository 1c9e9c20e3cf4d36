"""The tool pipeline (``tools/_pipeline.py``): ask routing texts, a throwing
pre-execute listener, guards that can only deny, post-execute, cancellation."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from compose_support import compose_kernel
from tether._signals import AbortSignal
from tether.kernel._plugin import Kernel
from tether.policy import APPROVAL_SERVICE
from tether.policy._approval import Screened, register_answerer
from tether.tools._base import PostDecision, PreDecision, ToolArgs, ToolCall, ToolResult
from tether.tools._pipeline import ABORTED_BEFORE_DISPATCH, ToolRuntime
from tether.tools._seams import POST_EXECUTE, PRE_EXECUTE, TOOL_GUARD


class MarkArgs(ToolArgs):
    name: str = "marker"


class Mark:
    """Writes a marker file into the workspace: its existence proves the body ran."""

    name = "mark"
    description = "Create a marker file."
    Args = MarkArgs

    def __init__(self, root: Path) -> None:
        self.root = root

    async def run(self, call: ToolCall) -> ToolResult:
        assert isinstance(call.args, MarkArgs)
        (self.root / call.args.name).write_text("ran")
        return ToolResult("marked")


class Owner:
    def __init__(self, session: Any) -> None:
        self.session = session


def compose(tmp_path: Path, *, approval: bool = True) -> tuple[Kernel, ToolRuntime, Owner]:
    rig = compose_kernel(tmp_path, approval="ask" if approval else None, tools=[Mark(tmp_path)])
    return rig.kernel, rig.tools, Owner(rig.session(turn=True))


def ask_with(reason: str | None) -> Any:
    def gate(call: ToolCall, next_: Any) -> PreDecision:
        return PreDecision.ask(reason)

    return gate


async def run(
    tools: ToolRuntime, owner: Owner | None, signal: AbortSignal | None = None
) -> ToolResult:
    return await tools.execute(owner, "c1", "mark", "{}", signal or AbortSignal())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("reason", "text"),
    [
        (None, 'Error: tool "mark" requires approval (not yet supported)'),
        ("policy says so", "Error: policy says so"),
    ],
)
async def test_ask_without_an_approval_service_denies(
    tmp_path: Path, reason: str | None, text: str
) -> None:
    kernel, tools, owner = compose(tmp_path, approval=False)
    kernel.ctx.on(PRE_EXECUTE, ask_with(reason))
    result = await run(tools, owner)
    assert (result.content, result.is_error) == (text, True)
    assert not (tmp_path / "marker").exists()


@pytest.mark.parametrize(
    ("answer", "text"),
    [
        ("rejected", 'Error: the user rejected tool "mark"'),
        ("cancelled", 'Error: approval for tool "mark" was cancelled'),
        (
            "unavailable",
            'Error: tool "mark" requires approval, but no approval channel is available',
        ),
        (
            "definitely",
            'Error: tool "mark" requires approval, but no approval channel is available',
        ),
    ],
)
async def test_ask_outcomes_deny_with_the_reference_texts(
    tmp_path: Path, answer: str, text: str
) -> None:
    kernel, tools, owner = compose(tmp_path)
    kernel.ctx.on(PRE_EXECUTE, ask_with("why"))
    register_answerer(kernel.ctx, lambda request, next_: answer)
    result = await run(tools, owner)
    assert (result.content, result.is_error) == (text, True)
    assert not (tmp_path / "marker").exists()


async def test_allowed_once_dispatches_and_forwards_the_ask_fields(tmp_path: Path) -> None:
    kernel, tools, owner = compose(tmp_path)
    kernel.ctx.on(PRE_EXECUTE, ask_with("why not"))
    seen: list[Any] = []

    def answerer(request: Any, next_: Any) -> str:
        seen.append((request.tool_name, request.call_id, request.reason, request.agent))
        return "allowed-once"

    register_answerer(kernel.ctx, answerer)
    result = await run(tools, owner)
    assert result.content == "marked" and (tmp_path / "marker").exists()
    assert seen == [("mark", "c1", "why not", owner)]


async def test_an_agentless_ask_denies_without_asking(tmp_path: Path) -> None:
    kernel, tools, _ = compose(tmp_path)
    kernel.ctx.on(PRE_EXECUTE, ask_with(None))
    asked: list[Any] = []
    register_answerer(kernel.ctx, lambda request, next_: asked.append(request) or "allowed-once")
    result = await run(tools, None)
    assert (
        result.content
        == 'Error: tool "mark" requires approval, but the call has no agent to route it through'
    )
    assert asked == []


async def test_cancellation_overtaking_approval_is_aborted_before_dispatch(tmp_path: Path) -> None:
    kernel, tools, owner = compose(tmp_path)
    kernel.ctx.on(PRE_EXECUTE, ask_with(None))
    signal = AbortSignal()
    asked = asyncio.Event()

    async def hang(request: Any, next_: Any) -> str:
        asked.set()
        await asyncio.sleep(3600)
        return "allowed-once"

    register_answerer(kernel.ctx, hang)
    pending = asyncio.ensure_future(run(tools, owner, signal))
    await asked.wait()
    signal.abort("user")
    result = await pending
    assert result.content == f"Error: {ABORTED_BEFORE_DISPATCH}"
    assert not (tmp_path / "marker").exists()


async def test_a_throwing_pre_execute_listener_is_an_error_result(tmp_path: Path) -> None:
    kernel, tools, owner = compose(tmp_path)

    def boom(call: ToolCall, next_: Any) -> PreDecision:
        raise RuntimeError("listener exploded")

    kernel.ctx.on(PRE_EXECUTE, boom)
    result = await run(tools, owner)
    assert result.content == 'Error: a pre-execute hook failed for tool "mark": listener exploded'
    assert not (tmp_path / "marker").exists()


async def test_guards_run_after_an_allow_and_can_only_deny(tmp_path: Path) -> None:
    kernel, tools, owner = compose(tmp_path)
    kernel.ctx.on(PRE_EXECUTE, lambda call, next_: PreDecision.allow())
    kernel.ctx.on(TOOL_GUARD, lambda call: None)
    kernel.ctx.on(TOOL_GUARD, lambda call: "guarded: no markers today")
    result = await run(tools, owner)
    assert result.content == "Error: guarded: no markers today"
    assert not (tmp_path / "marker").exists()


async def test_guards_also_follow_an_allowed_once_approval(tmp_path: Path) -> None:
    kernel, tools, owner = compose(tmp_path)
    kernel.ctx.on(PRE_EXECUTE, ask_with(None))
    register_answerer(kernel.ctx, lambda request, next_: "allowed-once")
    kernel.ctx.on(TOOL_GUARD, lambda call: "guard says no")
    result = await run(tools, owner)
    assert result.content == "Error: guard says no"
    assert not (tmp_path / "marker").exists()


async def test_post_execute_may_replace_or_block(tmp_path: Path) -> None:
    kernel, tools, owner = compose(tmp_path)
    handle = kernel.ctx.on(
        POST_EXECUTE,
        lambda payload, next_: PostDecision("accept", result=ToolResult("rewritten")),
    )
    assert (await run(tools, owner)).content == "rewritten"
    handle.dispose()
    kernel.ctx.on(POST_EXECUTE, lambda payload, next_: PostDecision("block", feedback="not this"))
    result = await run(tools, owner)
    assert (result.content, result.is_error) == ("Error: not this", True)


async def test_an_invalid_pre_decision_fails_closed(tmp_path: Path) -> None:
    kernel, tools, owner = compose(tmp_path)
    kernel.ctx.on(PRE_EXECUTE, lambda call, next_: "allow")
    result = await run(tools, owner)
    assert (
        result.content == 'Error: a pre-execute hook returned an invalid decision for tool "mark"'
    )
    assert not (tmp_path / "marker").exists()


# -- each step's own stops ----------------------------------------------------------------------
class ProbeArgs(ToolArgs):
    fail: bool = False
    hang: bool = False


class Probe:
    """Records the policy its body ran under; can raise or hang."""

    name = "probe"
    description = "Record the call's policy."
    Args = ProbeArgs

    def __init__(self) -> None:
        self.policies: list[Any] = []
        self.started = asyncio.Event()

    async def run(self, call: ToolCall) -> ToolResult:
        assert isinstance(call.args, ProbeArgs)
        self.policies.append(call.policy)
        self.started.set()
        if call.args.fail:
            raise OSError("disk on fire")
        if call.args.hang:
            await asyncio.sleep(3600)
        return ToolResult("probed")


@pytest.mark.parametrize(
    ("name", "raw", "allowed", "text"),
    [
        ("nope", "{}", None, 'Error: unknown tool "nope"'),
        ("mark", "{}", frozenset({"other"}), 'Error: unknown tool "mark"'),
        (
            "mark",
            "{nope",
            None,
            'Error: arguments for tool "mark" are not valid JSON: Expecting property name '
            "enclosed in double quotes",
        ),
        ("mark", "[]", None, 'Error: arguments for tool "mark" must be a JSON object'),
        (
            "mark",
            '{"x": ' + "[" * 100_000 + "]" * 100_000 + "}",
            None,
            'Error: arguments for tool "mark" are nested too deeply',
        ),
        (
            "mark",
            '{"name": 3}',
            None,
            'Error: invalid arguments for tool "mark": name: Input should be a valid string',
        ),
        (
            "mark",
            '{"other": 1}',
            None,
            'Error: invalid arguments for tool "mark": other: Extra inputs are not permitted',
        ),
    ],
)
async def test_look_up_and_parse_stops_before_any_listener(
    tmp_path: Path, name: str, raw: str, allowed: frozenset[str] | None, text: str
) -> None:
    kernel, tools, owner = compose(tmp_path)
    seen: list[ToolCall] = []
    kernel.ctx.on(PRE_EXECUTE, lambda call, next_: seen.append(call) or next_())
    result = await tools.execute(owner, "c1", name, raw, AbortSignal(), allowed=allowed)  # type: ignore[arg-type]
    assert (result.content, result.is_error) == (text, True)
    assert seen == [] and not (tmp_path / "marker").exists()


async def test_a_call_aborted_before_dispatch_reaches_no_listener(tmp_path: Path) -> None:
    kernel, tools, owner = compose(tmp_path)
    seen: list[ToolCall] = []
    kernel.ctx.on(PRE_EXECUTE, lambda call, next_: seen.append(call) or next_())
    signal = AbortSignal()
    signal.abort("user")
    result = await run(tools, owner, signal)
    assert (result.content, result.details) == (
        f"Error: {ABORTED_BEFORE_DISPATCH}",
        {"cancelled": True},
    )
    assert seen == []


async def test_a_deny_without_a_reason_names_the_tool(tmp_path: Path) -> None:
    kernel, tools, owner = compose(tmp_path)
    kernel.ctx.on(PRE_EXECUTE, lambda call, next_: PreDecision("deny"))
    assert (await run(tools, owner)).content == 'Error: tool "mark" was denied'
    assert not (tmp_path / "marker").exists()


async def test_an_ask_whose_request_raises_is_an_error_result(tmp_path: Path) -> None:
    kernel, tools, owner = compose(tmp_path)
    owner.session.append("turn/end", {"turn": 1, "reason": "completed"})
    kernel.ctx.on(PRE_EXECUTE, ask_with(None))
    result = await run(tools, owner)
    assert result.content == (
        "Error: approval for tool \"mark\" failed: approval for tool 'mark' requested outside an "
        f"open turn of session {owner.session.id!r}: the approval/asked and approval/decided "
        "audit pair must be enclosed in a turn"
    )
    assert not (tmp_path / "marker").exists()


@dataclass(frozen=True)
class ForeignDecision:
    outcome: str
    failure: None = None
    rule: None = None


class ForeignApproval:
    """Another implementation of the ``approval`` service, answering outside the vocabulary."""

    def screens(self, session: Any) -> bool:
        return True

    async def screen(self, request: Any) -> Screened:
        return Screened()

    async def decide(self, request: Any) -> ForeignDecision:
        return ForeignDecision("maybe")


async def test_an_answer_outside_the_vocabulary_from_the_service_denies(tmp_path: Path) -> None:
    kernel, tools, owner = compose(tmp_path, approval=False)
    kernel.ctx.provide(APPROVAL_SERVICE, ForeignApproval())
    kernel.ctx.on(PRE_EXECUTE, ask_with(None))
    result = await run(tools, owner)
    assert result.content == 'Error: approval for tool "mark" returned an unknown outcome'
    assert not (tmp_path / "marker").exists()


async def test_an_abort_while_deciding_stops_the_call_after_the_guards(tmp_path: Path) -> None:
    kernel, tools, owner = compose(tmp_path)
    signal = AbortSignal()
    guarded: list[str] = []

    def abort_then_allow(call: ToolCall, next_: Any) -> PreDecision:
        signal.abort("user")
        return PreDecision.allow()

    kernel.ctx.on(PRE_EXECUTE, abort_then_allow)
    kernel.ctx.on(TOOL_GUARD, lambda call: guarded.append(call.name))
    result = await run(tools, owner, signal)
    assert result.content == f"Error: {ABORTED_BEFORE_DISPATCH}"
    assert guarded == ["mark"] and not (tmp_path / "marker").exists()


async def test_a_raising_guard_denies(tmp_path: Path) -> None:
    kernel, tools, owner = compose(tmp_path)

    def broken(call: ToolCall) -> None:
        raise ValueError("guard broke")

    kernel.ctx.on(TOOL_GUARD, broken)
    assert (await run(tools, owner)).content == 'Error: a guard failed for tool "mark": guard broke'
    assert not (tmp_path / "marker").exists()


async def test_listeners_see_the_call_before_its_policy_and_the_body_runs_under_it(
    tmp_path: Path,
) -> None:
    kernel, tools, owner = compose(tmp_path)
    probe = Probe()
    tools.register(probe)
    before: list[Any] = []
    kernel.ctx.on(PRE_EXECUTE, lambda call, next_: before.append(call.policy) or next_())
    kernel.ctx.on(TOOL_GUARD, lambda call: before.append(call.policy))
    after: list[Any] = []
    kernel.ctx.on(POST_EXECUTE, lambda payload, next_: after.append(payload[0].policy) or next_())
    result = await tools.execute(owner, "c1", "probe", "{}", AbortSignal())  # type: ignore[arg-type]
    assert result.content == "probed"
    assert before == [None, None]
    [policy] = probe.policies
    assert (policy.mode, policy.workspace_root, policy.session_id) == (
        "workspace-write",
        str(tmp_path.resolve()),
        owner.session.id,
    )
    assert after == [policy]


async def test_a_raising_or_cancelled_body_is_an_error_result(tmp_path: Path) -> None:
    _, tools, owner = compose(tmp_path)
    probe = Probe()
    tools.register(probe)
    failed = await tools.execute(owner, "c1", "probe", '{"fail": true}', AbortSignal())  # type: ignore[arg-type]
    assert failed.content == 'Error: tool "probe" failed: OSError: disk on fire'
    signal = AbortSignal()
    probe.started.clear()
    running = asyncio.ensure_future(
        tools.execute(owner, "c2", "probe", '{"hang": true}', signal)  # type: ignore[arg-type]
    )
    await probe.started.wait()
    signal.abort("user")
    cancelled = await running
    assert (cancelled.content, cancelled.details) == (
        'Error: tool "probe" was cancelled',
        {"cancelled": True},
    )


async def test_a_failing_or_invalid_post_execute_is_an_error_result(tmp_path: Path) -> None:
    kernel, tools, owner = compose(tmp_path)

    def boom(payload: Any, next_: Any) -> PostDecision:
        raise RuntimeError("post broke")

    handle = kernel.ctx.on(POST_EXECUTE, boom)
    assert (await run(tools, owner)).content == (
        'Error: a post-execute hook failed for tool "mark": post broke'
    )
    handle.dispose()
    handle = kernel.ctx.on(POST_EXECUTE, lambda payload, next_: "accept")
    assert (await run(tools, owner)).content == (
        'Error: a post-execute hook returned an invalid decision for "mark"'
    )
    handle.dispose()
    kernel.ctx.on(POST_EXECUTE, lambda payload, next_: PostDecision("block"))
    assert (await run(tools, owner)).content == 'Error: tool "mark" result was blocked'


def test_schemas_are_kept_while_the_tools_stand_and_rebuilt_when_they_change(
    tmp_path: Path,
) -> None:
    # The same entry per tool while nothing changed, whichever agent asks; a description
    # changed, a tool registered (for everyone or for one agent), a tool removed, a filter:
    # each is seen at the next request.
    _, tools, owner = compose(tmp_path)

    def described() -> list[tuple[str, str]]:
        return [(name, text) for name, text, _ in tools.schemas(None, owner)]

    (first,) = tools.schemas(None, owner)
    assert tools.schemas(None, owner)[0] is first
    assert tools.schemas(None, None)[0] is first
    assert described() == [("mark", "Create a marker file.")]
    mark = tools.get("mark")
    assert mark is not None
    mark.description = "Create a marker file, now described anew."  # type: ignore[misc]
    assert described() == [("mark", "Create a marker file, now described anew.")]
    assert tools.schemas(None, owner)[0] is not first

    class Other(Mark):
        name = "other"
        description = "Another marker."

    shared = tools.register(Other(tmp_path))
    assert [name for name, _ in described()] == ["mark", "other"]
    shared.dispose()
    assert [name for name, _ in described()] == ["mark"]
    own = tools.register(Other(tmp_path), scope=owner)
    assert [name for name, _ in described()] == ["mark", "other"]
    assert [name for name, _, _ in tools.schemas(None, None)] == ["mark"]
    assert [name for name, _, _ in tools.schemas(frozenset({"other"}), owner)] == ["other"]
    own.dispose()
    assert [name for name, _ in described()] == ["mark"]
    assert len(tools._advertised) == 1  # the removed tools' entries are forgotten
