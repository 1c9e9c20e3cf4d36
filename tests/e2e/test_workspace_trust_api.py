"""Workspace trust from Python: ``Harness.open(workspace_trust=...)`` over real files, a real
JSONL store, the scripted model and the real sandbox. The planted ``tether.toml`` files are
the ones ``test_workspace_trust_cli`` plants (each would widen the run if used)."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest
from test_workspace_trust_cli import escalations, plants

from tether._harness import Harness
from tether.kernel import WorkspaceTrust, WorkspaceUntrustedError
from tether.kernel._trust_store import TrustStore
from tether.kernel._workspace_trust import record_trust
from tether.sandbox import SANDBOX_SERVICE, SandboxProvider
from tether.session._json import thaw

pytestmark = pytest.mark.timeout(120)


def idle(tmp_path: Path) -> str:
    (tmp_path / "idle.json").write_text('{"agents": [{"match": {}, "steps": [{"text": "ok"}]}]}')
    return f"scripted:{tmp_path / 'idle.json'}"


def decisions(harness: Harness, session_id: str) -> list[str]:
    session = harness.store.get(session_id)
    assert session is not None
    return [thaw(e.data)["outcome"] for e in session.events if e.type == "approval/decided"]


async def test_open_refuses_untrusted_configuration_before_the_store_exists(
    ws: Path, tmp_path: Path
) -> None:
    (ws / "tether.toml").write_text('[[plugins]]\nname = "ask_tools"\n')
    store = ws.parent / "store"
    with pytest.raises(WorkspaceUntrustedError) as info:
        async with Harness.open(workspace=ws, model=idle(tmp_path), store=f"jsonl://{store}"):
            pytest.fail("a harness over untrusted configuration was composed")
    assert info.value.files == (("tether.toml", "new"),)
    assert not store.exists()
    record_trust(Harness.inspect_workspace(workspace=ws), TrustStore.for_user())
    async with Harness.open(
        workspace=ws, model=idle(tmp_path), store=f"jsonl://{store}"
    ) as harness:
        assert "ask_tools" in harness.kernel.plugins()


def escalating(
    ws: Path, tmp_path: Path, trust: WorkspaceTrust | str
) -> AbstractAsyncContextManager[Harness]:
    """A read-only, ask harness whose model asks to escalate a write outside the workspace,
    then writes there plainly (``test_workspace_trust_cli.escalations``)."""
    (tmp_path / "outside").mkdir()
    return Harness.open(
        workspace=ws,
        model=f"scripted:{escalations(tmp_path / 's.json', tmp_path / 'outside')}",
        store=f"jsonl://{tmp_path / 'store'}",
        sandbox="read-only",
        approval="ask",
        workspace_trust=trust,
    )


@pytest.mark.bwrap
@pytest.mark.parametrize(
    "option",
    ["runner_command", "bwrap_path", "backends", "approver_command", "approval_from_store"],
)
async def test_ignore_composes_without_any_option_of_the_workspace(
    ws: Path, tmp_path: Path, option: str
) -> None:
    marker = tmp_path / "marker"
    (ws / "tether.toml").write_text(plants(ws, marker)[option])
    async with escalating(ws, tmp_path, WorkspaceTrust.IGNORE) as harness:
        assert harness.kernel.plugins()[-3:] == ["sandbox", "bash", "subagents"]
        provider = harness.ctx.get(SANDBOX_SERVICE)
        assert isinstance(provider, SandboxProvider)
        assert (provider.chain, provider.backend_name()) == (("bwrap", "landlock"), "bwrap")
        result = await harness.run("do the task")
        assert decisions(harness, result.session_id) == ["unavailable"]  # nobody to answer
    assert not marker.exists()
    assert sorted((tmp_path / "outside").iterdir()) == []


async def test_once_uses_the_configuration_as_it_is(ws: Path, tmp_path: Path) -> None:
    """The control for the test above: the planted approver, trusted, approves the escalation
    (and the write outside happens), so the refusals elsewhere are what stop it."""
    marker = tmp_path / "marker"
    (ws / "tether.toml").write_text(plants(ws, marker)["approver_command"])
    async with escalating(ws, tmp_path, "once") as harness:
        result = await harness.run("do the task")
        assert decisions(harness, result.session_id) == ["allowed-once"]
    assert marker.read_text() == "approver\n"
    assert (tmp_path / "outside" / "escalated").read_text() == "escalated\n"
    assert TrustStore.for_user().records() == []


async def test_a_config_the_caller_names_outside_the_workspace_needs_no_trust(
    ws: Path, tmp_path: Path
) -> None:
    (ws / "tether.toml").write_text('[[plugins]]\nname = "no_such_plugin"\n')
    own = tmp_path / "own.toml"
    own.write_text('[[plugins]]\nname = "ask_tools"\n')
    async with Harness.open(
        workspace=ws,
        model=idle(tmp_path),
        store=f"jsonl://{tmp_path / 'store'}",
        config=own,
    ) as harness:
        assert "ask_tools" in harness.kernel.plugins()
