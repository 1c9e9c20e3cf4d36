"""Sandbox policy service (``policy.spec``)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from policy_support import SessionOnlyAgent, ToyAgent, compose, layout
from policy_support import sandbox_of as service_of

from tether.kernel import PluginConfigError
from tether.kernel._config import resolve_plugin
from tether.kernel._plugin import Kernel
from tether.policy import (
    SANDBOX_POLICY_SERVICE,
    SandboxExecutionPolicy,
    SandboxMode,
    SandboxPolicyService,
)
from tether.policy._errors import InvalidModeError, InvalidPolicyConfigError, InvalidSourceError
from tether.policy._sandbox_policy import fold_sandbox_mode, sandbox_policy_plugin
from tether.session import Event, Session, SessionHeader, SessionMeta, SessionStore
from tether.session.persistence._factory import open_persistence

READ_ONLY_TEXT = (
    "Current tether file policy: read-only. Commands and file tools run under a sandbox that "
    "cannot modify files. Do not refuse a task from this label alone: try the tool and follow "
    "its denial and escalation guidance."
)
DANGER_TEXT = (
    "Current tether file policy: danger-full-access. The sandbox does not restrict file "
    "modifications."
)


def workspace_write_text(root: str) -> str:
    return (
        "Current tether file policy: workspace-write. Commands and file tools may modify files "
        f"under the session workspace: {json.dumps(root)}. Some platform temp areas may also be "
        "writable. Do not refuse a task from this label alone: try the tool and follow its "
        "denial and escalation guidance."
    )


def session_at(cwd: str | None = None, session_id: str = "s1") -> Session:
    return Session(SessionHeader(session_id, 0, cwd=cwd))


def contexts(kernel: Kernel, agent: object) -> list[tuple[str, str]]:
    return kernel.runtime.prompt.render("context", agent)


# -- defaults and precedence -------------------------------------------------------------------
def test_default_is_read_only_under_the_process_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    service = service_of(compose(sandbox={}))
    assert service.resolve() == SandboxExecutionPolicy(
        SandboxMode.READ_ONLY, os.path.realpath(tmp_path), None
    )


def test_precedence_granted_over_session_over_default(tmp_path: Path) -> None:
    service = SandboxPolicyService("danger-full-access", str(tmp_path))
    session = session_at()
    assert service.resolve(session).mode is SandboxMode.DANGER_FULL_ACCESS
    service.set_sandbox_mode(session, "read-only")
    assert service.resolve(session).mode is SandboxMode.READ_ONLY
    granted = service.resolve(session, granted_mode="workspace-write")
    assert granted == SandboxExecutionPolicy(
        SandboxMode.WORKSPACE_WRITE, os.path.realpath(tmp_path), "s1"
    )
    # A grant is per call: nothing was written, the next resolution is the session's again.
    assert service.resolve(session).mode is SandboxMode.READ_ONLY
    assert service.resolve(None, granted_mode="workspace-write").mode is SandboxMode.WORKSPACE_WRITE


def test_a_session_override_may_narrow_below_the_default(tmp_path: Path) -> None:
    service = SandboxPolicyService("workspace-write", str(tmp_path))
    session = session_at()
    service.set_sandbox_mode(session, "read-only")
    assert service.resolve(session).mode is SandboxMode.READ_ONLY


def test_root_comes_from_the_session_cwd_canonicalised_else_config(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    config_root = tmp_path / "config-root"
    config_root.mkdir()
    service = SandboxPolicyService(workspace_root=str(config_root))
    in_cwd = session_at(str(link))
    assert service.resolve(in_cwd).workspace_root == str(real.resolve())
    assert service.resolve(in_cwd).session_id == "s1"
    assert service.resolve(session_at(None)).workspace_root == str(config_root.resolve())


def test_config_root_through_a_symlink_is_canonicalised(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    service = service_of(compose(sandbox={"workspace_root": str(tmp_path / "link")}))
    assert service.resolve().workspace_root == str(real.resolve())


def test_override_of_is_the_raw_fold_never_the_default() -> None:
    service = SandboxPolicyService("danger-full-access")
    session = session_at()
    assert service.override_of(session) is None
    service.set_sandbox_mode(session, "workspace-write")
    service.set_sandbox_mode(session, "read-only")
    assert service.override_of(session) is SandboxMode.READ_ONLY
    assert fold_sandbox_mode(session.events) is SandboxMode.READ_ONLY
    assert fold_sandbox_mode([]) is None


# -- validation --------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["full", "READ-ONLY", "", "readonly"])
def test_bad_modes_are_rejected_at_load(bad: str) -> None:
    kernel = Kernel()
    with pytest.raises(PluginConfigError) as info:
        kernel.load(sandbox_policy_plugin, {"mode": bad})
    message = str(info.value)
    assert info.value.code == "PLUGIN_CONFIG"
    assert "sandbox_policy" in message
    for accepted in ("read-only", "workspace-write", "danger-full-access"):
        assert accepted in message
    assert kernel.ctx.get(SANDBOX_POLICY_SERVICE) is None
    assert kernel.runtime.prompt.parts("context", None) == ()


def test_unknown_config_keys_are_rejected_at_load() -> None:
    with pytest.raises(PluginConfigError, match="sandbox_mode"):
        Kernel().load(sandbox_policy_plugin, {"sandbox_mode": "read-only"})


def test_bad_mode_in_the_constructor() -> None:
    with pytest.raises(InvalidModeError) as info:
        SandboxPolicyService("full")
    assert info.value.code == "INVALID_MODE"
    assert str(info.value) == (
        "invalid sandbox mode 'full' (accepted: read-only, workspace-write, danger-full-access)"
    )
    with pytest.raises(InvalidPolicyConfigError):
        SandboxPolicyService(workspace_root="")


# -- the write path ---------------------------------------------------------------------------
def test_set_sandbox_mode_appends_exactly_one_event() -> None:
    service = SandboxPolicyService()
    session = session_at()
    event = service.set_sandbox_mode(session, SandboxMode.WORKSPACE_WRITE)
    assert layout(session) == [("sandbox/mode", {"mode": "workspace-write"})]
    assert event is session.events[0]
    service.set_sandbox_mode(session, "read-only", source="delegation")
    service.set_sandbox_mode(session, "danger-full-access", source="parent")
    assert layout(session)[1:] == [
        ("sandbox/mode", {"mode": "read-only", "source": "delegation"}),
        ("sandbox/mode", {"mode": "danger-full-access", "source": "parent"}),
    ]
    # The payload holds plain strings, not enum members.
    assert type(session.events[0].data["mode"]) is str


def test_set_sandbox_mode_validates_before_appending() -> None:
    service = SandboxPolicyService()
    session = session_at()
    with pytest.raises(InvalidModeError):
        service.set_sandbox_mode(session, "everything")
    with pytest.raises(InvalidSourceError) as info:
        service.set_sandbox_mode(session, "read-only", source="user")  # type: ignore[arg-type]
    assert info.value.code == "INVALID_POLICY_SOURCE"
    assert len(session) == 0


def test_a_corrupt_stored_mode_fails_loudly() -> None:
    seed = [
        Event.make("sandbox/mode", 0, 0, {"mode": "read-only"}),
        Event.make("sandbox/mode", 1, 0, {"mode": "root"}),
    ]
    session = Session(SessionHeader("s1", 0), seed)
    service = SandboxPolicyService("danger-full-access")
    with pytest.raises(InvalidModeError, match="sandbox/mode event #1"):
        service.resolve(session)


# -- resume ------------------------------------------------------------------------------------
async def test_a_resumed_log_reconstructs_the_policy(tmp_path: Path) -> None:
    url = f"jsonl://{tmp_path / 'store'}"
    store = SessionStore(open_persistence(url))
    service = SandboxPolicyService("read-only", str(tmp_path))
    session = store.create("s1", meta=SessionMeta(cwd=str(tmp_path)))
    service.set_sandbox_mode(session, "danger-full-access")
    service.set_sandbox_mode(session, "workspace-write", source="delegation")
    before = service.resolve(session)
    await store.close()

    reopened_store = SessionStore(open_persistence(url))
    reopened = await reopened_store.open("s1")
    assert reopened is not session
    assert service.resolve(reopened) == before
    assert before.mode is SandboxMode.WORKSPACE_WRITE
    # The pure fold over a seed built from stored JSON agrees too.
    seed = [Event.from_json(e.to_json()) for e in session.events]
    assert service.resolve(Session(session.header, seed)) == before
    await reopened_store.close()


# -- runtime context ---------------------------------------------------------------------------
def test_context_texts_for_each_mode(tmp_path: Path) -> None:
    kernel = compose(sandbox={"mode": "read-only"})
    service = service_of(kernel)
    agent = ToyAgent(session_at(str(tmp_path)))
    assert contexts(kernel, agent) == [("sandbox:policy", READ_ONLY_TEXT)]
    service.set_sandbox_mode(agent.session, "workspace-write")
    assert contexts(kernel, agent) == [
        ("sandbox:policy", workspace_write_text(os.path.realpath(tmp_path)))
    ]
    service.set_sandbox_mode(agent.session, "danger-full-access")
    assert contexts(kernel, agent) == [("sandbox:policy", DANGER_TEXT)]
    (part,) = kernel.runtime.prompt.parts("context", agent)
    assert (part.name, part.order) == ("sandbox:policy", 110)


def test_workspace_root_is_json_quoted(tmp_path: Path) -> None:
    odd = tmp_path / 'quote " and ünïcode'
    odd.mkdir()
    service = SandboxPolicyService("workspace-write")
    text = service.context_text(SessionOnlyAgent(session_at(str(odd))))
    assert json.dumps(os.path.realpath(odd), ensure_ascii=False) in text
    assert '\\"' in text


def test_agentless_assembly_contributes_nothing() -> None:
    kernel = compose(sandbox={"mode": "danger-full-access"})
    assert service_of(kernel).context_text(None) == ""
    assert contexts(kernel, None) == []


def test_context_is_byte_stable_across_tmpdir_and_reflects_the_latest_switch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel = compose(sandbox={"mode": "workspace-write"})
    service = service_of(kernel)
    agent = ToyAgent(session_at(str(tmp_path)))
    first = contexts(kernel, agent)
    for other in ("a", "b"):
        tmp = tmp_path / f"tmp-{other}"
        tmp.mkdir()
        monkeypatch.setenv("TMPDIR", str(tmp))
        monkeypatch.setattr(tempfile, "tempdir", None)
        assert tempfile.gettempdir() == str(tmp)
        assert contexts(kernel, agent) == first
        assert str(tmp) not in contexts(kernel, agent)[0][1]
    service.set_sandbox_mode(agent.session, "read-only")
    assert contexts(kernel, agent) == [("sandbox:policy", READ_ONLY_TEXT)]
    service.set_sandbox_mode(agent.session, "workspace-write")
    assert contexts(kernel, agent) == first


def test_unloading_the_plugin_removes_service_and_context() -> None:
    kernel = Kernel()
    handle = kernel.load(sandbox_policy_plugin)
    agent = ToyAgent(session_at())
    assert [name for name, _ in contexts(kernel, agent)] == ["sandbox:policy"]
    handle.dispose()
    assert kernel.ctx.get(SANDBOX_POLICY_SERVICE) is None
    assert contexts(kernel, agent) == []


def test_registered_as_an_entry_point() -> None:
    assert resolve_plugin("sandbox_policy") is sandbox_policy_plugin


def test_a_workspace_link_swapped_between_two_calls_is_resolved_anew(tmp_path: Path) -> None:
    # The workspace root is resolved on every call, nothing kept: a session whose cwd is a
    # link is confined to where the link leads now, never to where it led before.
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    link = tmp_path / "current"
    link.symlink_to(first)
    service = SandboxPolicyService("workspace-write")
    session = session_at(str(link))
    assert service.resolve(session).workspace_root == str(first)
    link.unlink()
    link.symlink_to(second)
    assert service.resolve(session).workspace_root == str(second)
    link.unlink()
    assert service.resolve(session).workspace_root == str(link)  # gone: as written
