"""Model-chosen patterns that would backtrack for ever, or expand without bound: ``grep`` and
``glob`` end them with an error the model can act on, and an abort stops a long search."""

from __future__ import annotations

import asyncio
import json
import sys
import threading

import pytest
from pydantic import ValidationError

from tether._signals import AbortSignal
from tether.kernel import Context, Runtime
from tether.policy import SANDBOX_POLICY_SERVICE, SandboxExecutionPolicy, SandboxPolicyService
from tether.tools._pipeline import ToolRuntime
from tether.tools.fs import GlobTool, GrepTool

from .conftest import Host, run_tool

GREP = GrepTool()
GLOB = GlobTool()
ADVICE = (
    "Use a simpler pattern (nested repetition such as (a+)+ or (x|x)* backtracks exponentially)"
)


async def test_nested_repetition_over_a_long_line_is_refused_with_the_file_and_line(
    host: Host, policy: SandboxExecutionPolicy
) -> None:
    (host.ws / "a.txt").write_text("fine\n")
    (host.ws / "big.txt").write_text("ok\n" + "a" * 5000 + "!\n" + "x" * 5000 + "\n")
    nested = await run_tool(GREP, policy, pattern="(a+)+$")
    alternation = await run_tool(GREP, policy, pattern="(x|x)*[yz]", path="big.txt")
    assert nested.is_error and alternation.is_error
    assert nested.content == (
        "Error: the regular expression (a+)+$ is too expensive: matching it against line 2 of "
        f"big.txt took longer than 1 s. {ADVICE}, a narrower path or glob, or literal=true to "
        "search for the plain text."
    )
    assert alternation.content == (
        "Error: the regular expression (x|x)*[yz] is too expensive: matching it against line 3 "
        f"of big.txt took longer than 1 s. {ADVICE}, a narrower path or glob, or literal=true "
        "to search for the plain text."
    )


async def test_a_pattern_the_matcher_settles_at_once_and_a_literal_search_just_finish(
    host: Host, policy: SandboxExecutionPolicy
) -> None:
    (host.ws / "big.txt").write_text("x" * 5000 + "\n" + "a" * 5000 + "!\n" + "see (a+)+$ here\n")
    # (x|x)*y needs a "y" the line lacks: the matcher knows without backtracking.
    settled = await run_tool(GREP, policy, pattern="(x|x)*y")
    literal = await run_tool(GREP, policy, pattern="(a+)+$", literal=True)
    assert settled.content == "no matches for (x|x)*y"
    assert literal.content == "big.txt:3:see (a+)+$ here"


async def test_the_whole_call_has_one_budget(host: Host, policy: SandboxExecutionPolicy) -> None:
    (host.ws / "a.txt").write_text("hit\n")
    spent = await run_tool(GrepTool(search_budget=0), policy, pattern="hit")
    assert spent.content == (
        "Error: the regular expression hit is too expensive: this call used up its 0 s "
        f"matching budget (stopped at line 1 of a.txt). {ADVICE}, a narrower path or glob, or "
        "literal=true to search for the plain text."
    )


async def test_counted_repetitions_that_expand_past_the_limit_are_never_compiled(
    host: Host, policy: SandboxExecutionPolicy
) -> None:
    (host.ws / "a.txt").write_text("a\n")
    # regex would spend hours compiling this one (it expands counts as it compiles).
    huge = await run_tool(GREP, policy, pattern="((a{1000}){1000}){1000}")
    fine = await run_tool(GREP, policy, pattern="(?:a{10}){10}|a")
    assert huge.content == (
        "Error: the regular expression ((a{1000}){1000}){1000} is too large to compile: its "
        "counted repetitions ({m,n}) expand to more than 100000 pieces. Use smaller counts, or "
        "literal=true to search for the plain text."
    )
    assert fine.content == "a.txt:1:a"


async def test_glob_wildcards_that_would_backtrack_match_at_once(
    host: Host, policy: SandboxExecutionPolicy
) -> None:
    """``*a*a…*a`` then ``b`` takes a backtracking matcher seconds per name (a regular
    expression from this glob did); the glob matcher never backtracks."""
    names = ["a" * 250, "a" * 249 + "b"]
    for name in names:
        (host.ws / name).write_text("needle\n")
    pattern = "*a" * 200 + "b"
    found = await run_tool(GLOB, policy, pattern=pattern)
    filtered = await run_tool(GREP, policy, pattern="needle", glob=pattern)
    deep = await run_tool(GLOB, policy, pattern="**/" * 500 + "*b")
    assert found.content == names[1]
    assert filtered.content == f"{names[1]}:1:needle"
    assert deep.content == names[1]


async def test_glob_braces_are_capped_and_never_recurse(
    host: Host, policy: SandboxExecutionPolicy
) -> None:
    (host.ws / "a").write_text("")
    doubling = "{a,b}" * 11  # 2048 alternatives
    deep = "{a}" * 1300
    many = await run_tool(GLOB, policy, pattern=doubling)
    filtered = await run_tool(GREP, policy, pattern="x", glob=doubling)
    nested = await run_tool(GLOB, policy, pattern="{" * 500 + "a" + "}" * 500)
    assert (
        many.content
        == filtered.content
        == (
            f"Error: the glob pattern {doubling} expands to more than 1000 alternatives; use fewer "
            "{a,b} groups"
        )
    )
    assert (await run_tool(GLOB, policy, pattern=deep)).content == "no paths match " + deep
    with pytest.raises(ValidationError, match="at most 4096 characters"):
        GLOB.Args.model_validate({"pattern": "{a}" * 1400})
    assert nested.content == "a"


class AbortWhenTheSearchLooks(AbortSignal):
    """A signal that fires, on the loop, the first time the search's worker thread checks it:
    the abort lands while the search is under way, driven from here, with no sleep."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._loop = loop
        self._home = threading.get_ident()
        self.worker: int | None = None

    @property
    def aborted(self) -> bool:
        if self.worker is None and threading.get_ident() != self._home:
            self.worker = threading.get_ident()
            self._loop.call_soon_threadsafe(self.abort, "user")
        return super().aborted


def running_in(thread: int, module: str) -> bool:
    frame = sys._current_frames().get(thread)
    while frame is not None:
        if frame.f_code.co_filename.endswith(module):
            return True
        frame = frame.f_back
    return False


async def test_an_abort_mid_grep_ends_the_call_cancelled_and_stops_the_search(
    host: Host,
) -> None:
    """Without the search seeing the abort this would run for many minutes (every line
    backtracks for a while, the budgets are large) and the test would time out."""
    (host.ws / "slow.txt").write_text(("a" * 24 + "!\n") * 2000)
    ctx = Context(Runtime())
    ctx.provide(SANDBOX_POLICY_SERVICE, SandboxPolicyService("read-only", str(host.ws)))
    tools = ToolRuntime(ctx)
    tools.register(GrepTool(match_timeout=60, search_budget=3600))
    signal = AbortWhenTheSearchLooks(asyncio.get_running_loop())
    arguments = json.dumps({"pattern": "(a|aa)*$", "path": "slow.txt"})
    result = await tools.execute(None, "call-1", "grep", arguments, signal)
    assert result.content == 'Error: tool "grep" was cancelled'
    assert result.is_error and result.details == {"cancelled": True}
    # The call returned only once its worker had stopped searching.
    assert signal.worker is not None
    assert not running_in(signal.worker, "tether/tools/fs/_grep.py")
