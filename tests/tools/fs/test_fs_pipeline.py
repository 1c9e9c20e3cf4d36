"""The file tools through the real tool pipeline: validation, policy stamping, fail-closed."""

from __future__ import annotations

import json
from typing import Any

from tether._signals import AbortSignal
from tether.kernel import Context, Runtime
from tether.policy import SANDBOX_POLICY_SERVICE, SandboxPolicyService
from tether.tools._base import ToolResult
from tether.tools._pipeline import ToolRuntime, tool_schema
from tether.tools.fs import file_tools

from .conftest import Host, marker


def runtime(mode: str | None, host: Host) -> ToolRuntime:
    ctx = Context(Runtime())
    if mode is not None:
        ctx.provide(SANDBOX_POLICY_SERVICE, SandboxPolicyService(mode, str(host.ws)))
    tools = ToolRuntime(ctx)
    for tool in file_tools():
        tools.register(tool)
    return tools


async def call(tools: ToolRuntime, name: str, arguments: dict[str, Any] | str) -> ToolResult:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return await tools.execute(None, "call-1", name, raw, AbortSignal())


def test_file_tools_and_their_schemas() -> None:
    tools = file_tools()
    assert [t.name for t in tools] == ["read", "write", "edit", "ls", "glob", "grep"]
    schemas = {str(t.name): tool_schema(t) for t in tools}
    assert all(s["additionalProperties"] is False for s in schemas.values())
    assert {name: s.get("required", []) for name, s in schemas.items()} == {
        "read": ["path"],
        "write": ["path", "content"],
        "edit": ["path", "old_string", "new_string"],
        "ls": [],
        "glob": ["pattern"],
        "grep": ["pattern"],
    }
    assert list(schemas["edit"]["properties"]) == [
        "path",
        "old_string",
        "new_string",
        "replace_all",
    ]


async def test_bad_arguments_are_error_results(host: Host) -> None:
    tools = runtime("workspace-write", host)
    results = [
        await call(tools, "write", {"path": "a.txt", "content": "x", "mode": "0644"}),
        await call(tools, "write", {"path": "a.txt"}),
        await call(tools, "read", {"path": "a.txt", "offset": 0}),
        await call(tools, "edit", {"path": "a.txt", "old_string": "", "new_string": "x"}),
        await call(tools, "grep", {"pattern": "x", "ignore_case": "maybe"}),
        await call(tools, "ls", '{"path": '),
    ]
    assert [r.content for r in results] == [
        'Error: invalid arguments for tool "write": mode: Extra inputs are not permitted',
        'Error: invalid arguments for tool "write": content: Field required',
        'Error: invalid arguments for tool "read": offset: Input should be greater than or '
        "equal to 1",
        'Error: invalid arguments for tool "edit": old_string: String should have at least 1 '
        "character",
        'Error: invalid arguments for tool "grep": ignore_case: Input should be a valid boolean, '
        "unable to interpret input",
        'Error: arguments for tool "ls" are not valid JSON: Expecting value',
    ]
    assert all(r.is_error for r in results)
    assert list(host.ws.iterdir()) == []


async def test_policy_is_stamped_per_call(host: Host) -> None:
    writable = runtime("workspace-write", host)
    ok = await call(writable, "write", {"path": "notes/a.txt", "content": "hi"})
    assert ok.content == "Wrote 2 bytes to notes/a.txt"
    assert (host.ws / "notes" / "a.txt").read_text() == "hi"
    escape = await call(writable, "write", {"path": "../outside/x.txt", "content": "x"})
    assert escape.content == (
        f"Error: cannot write ../outside/x.txt: it is outside the workspace {host.ws} "
        f"(it resolves to {host.outside}/x.txt) {marker('workspace-write')}"
    )

    read_only = runtime("read-only", host)
    denied = await call(
        read_only, "edit", {"path": "notes/a.txt", "old_string": "hi", "new_string": "yo"}
    )
    assert denied.content == (
        f"Error: cannot write notes/a.txt: the sandbox is read-only {marker('read-only')}"
    )
    assert dict(denied.details) == {"sandbox_denied": True, "mode": "read-only"}
    read = await call(read_only, "read", {"path": "notes/a.txt"})
    assert read.content == "hi"
    assert (host.ws / "notes" / "a.txt").read_text() == "hi"


async def test_without_a_sandbox_policy_service_writes_fail_closed(host: Host) -> None:
    tools = runtime(None, host)
    result = await call(tools, "write", {"path": str(host.ws / "a.txt"), "content": "x"})
    assert result.content == "Error: no sandbox policy is composed; file writes are refused"
    assert list(host.ws.iterdir()) == []
