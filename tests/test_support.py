"""The shared test helpers themselves (the ``*_support`` modules every test file imports)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_support import TETHER, run_args, tether, tether_bytes
from compose_support import compose_kernel, record_answers
from event_support import events_of, kinds, plain, seq_kinds, type_data
from script_support import ROOT, call, script, write
from tether import __version__
from tether.kernel import SESSIONS_SERVICE
from tether.kernel._plugin import Kernel
from tether.policy import APPROVAL_SERVICE, SANDBOX_POLICY_SERVICE
from tether.policy._approval import ApprovalRequest
from tether.sandbox import SANDBOX_SERVICE
from tether.session import Session, SessionHeader
from tether.tools._pipeline import TOOLS_SERVICE
from tether.tools.fs import file_tools


# -- event_support -------------------------------------------------------------------------------
def session() -> Session:
    made = Session(SessionHeader(id="s", created_at=1), clock=lambda: 5)
    made.append("turn/start", {"turn": 1})
    made.append("sandbox/mode", {"mode": "read-only", "nested": {"a": [1, {"b": 2}]}})
    return made


class HoldsSession:
    def __init__(self, held: Session) -> None:
        self.session = held


def test_events_come_from_a_session_its_holder_or_a_sequence() -> None:
    s = session()
    assert events_of(s) == s.events
    assert events_of(HoldsSession(s)) == s.events
    assert events_of(list(s.events)) == list(s.events)
    with pytest.raises(AssertionError, match="no events in"):
        events_of(42)


def test_event_projections() -> None:
    s = session()
    assert kinds(s) == ["turn/start", "sandbox/mode"]
    assert kinds(HoldsSession(s), 1) == ["sandbox/mode"]
    assert seq_kinds(s.events) == [(0, "turn/start"), (1, "sandbox/mode")]
    assert type_data(s, 1) == [
        ("sandbox/mode", {"mode": "read-only", "nested": {"a": [1, {"b": 2}]}})
    ]
    data = plain(s.events[1])
    assert type(data["nested"]) is dict and type(data["nested"]["a"]) is list


# -- script_support ------------------------------------------------------------------------------
def test_script_writes_one_entry_for_the_root_or_a_given_match(tmp_path: Path) -> None:
    steps = [write("a.txt"), {"text": "done"}]
    path = script(tmp_path / "s.json", steps)
    assert json.loads(path.read_text()) == {"agents": [{"match": {"depth": 0}, "steps": steps}]}
    assert ROOT == {"depth": 0}
    anyone = script(tmp_path / "t.json", steps, match={})
    assert json.loads(anyone.read_text())["agents"][0]["match"] == {}


def test_step_builders() -> None:
    assert call("bash", command="ls") == {
        "tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}]
    }
    assert write() == call("write", path="out.txt", content="x")
    assert list(
        write("p", "c", sandbox_permissions="workspace-write")["tool_calls"][0]["arguments"]
    ) == ["path", "content", "sandbox_permissions"]


# -- cli_support ---------------------------------------------------------------------------------
def test_tether_runs_the_installed_console_script(tmp_path: Path) -> None:
    ran = tether("--version", cwd=tmp_path)
    assert (ran.returncode, ran.stdout) == (0, f"tether {__version__}\n")
    assert Path(TETHER).name == "tether"


def test_tether_bytes_drops_the_store_variable_and_adds_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TETHER_STORE", f"sqlite:///{tmp_path / 'inherited.db'}")
    given = f"sqlite:///{tmp_path / 'given.db'}"
    dropped = tether_bytes("sessions", "show", "nope")
    assert dropped.returncode == 1 and b"inherited.db" not in dropped.stderr
    added = tether_bytes("sessions", "show", "nope", env={"TETHER_STORE": given})
    assert added.returncode == 1
    assert b"STORE_NOT_FOUND" in added.stderr and b"given.db" in added.stderr


def test_run_args() -> None:
    assert run_args(Path("/m.json"), Path("/ws"), "jsonl:///s", "--sandbox", "read-only") == [
        "run",
        "--model",
        "scripted:/m.json",
        "--workspace",
        "/ws",
        "--store",
        "jsonl:///s",
        "--json",
        "--sandbox",
        "read-only",
        "do the task",
    ]
    assert run_args("/m.json", Path("/ws"), "s", prompt="go")[-1] == "go"


# -- compose_support -----------------------------------------------------------------------------
class Owner:
    def __init__(self, held: Session) -> None:
        self.session = held


async def test_compose_kernel_composes_what_it_is_given(tmp_path: Path) -> None:
    rig = compose_kernel(tmp_path, mode="read-only", answer="allowed-once", tools=file_tools())
    assert isinstance(rig.kernel, Kernel) and rig.ctx is rig.kernel.ctx
    assert rig.ctx.get(SESSIONS_SERVICE) is rig.store
    assert (
        rig.ctx.get(SANDBOX_POLICY_SERVICE).resolve(session=rig.session()).mode.value == "read-only"
    )
    assert rig.ctx.get(TOOLS_SERVICE) is None and rig.agents is None
    assert "write" in rig.tools.names()
    session = rig.session(turn=True)
    assert session.header.cwd == str(tmp_path) and kinds(session) == ["turn/start"]
    assert kinds(rig.session()) == []
    request = ApprovalRequest(Owner(session), "write")
    assert await rig.ctx.get(APPROVAL_SERVICE).request(request) == "allowed-once"
    [asked] = rig.asked
    assert (asked.agent, asked.tool_name) == (request.agent, "write")


async def test_compose_kernel_without_policies_provides_the_rest(tmp_path: Path) -> None:
    sandbox = object()
    rig = compose_kernel(
        tmp_path, mode=None, approval=None, sandbox=sandbox, provide_tools=True, agents=True
    )
    assert rig.ctx.get(SANDBOX_POLICY_SERVICE) is None and rig.ctx.get(APPROVAL_SERVICE) is None
    assert rig.ctx.get(SANDBOX_SERVICE) is sandbox
    assert rig.ctx.get(TOOLS_SERVICE) is rig.tools and rig.agents is not None
    assert rig.asked == []


async def test_record_answers_answers_every_request_and_records_it(tmp_path: Path) -> None:
    rig = compose_kernel(tmp_path)
    asked = record_answers(rig.ctx, "rejected")
    session = rig.session(turn=True)
    first, second = (
        ApprovalRequest(Owner(session), "write"),
        ApprovalRequest(Owner(session), "bash"),
    )
    approval = rig.ctx.get(APPROVAL_SERVICE)
    assert [await approval.request(first), await approval.request(second)] == ["rejected"] * 2
    assert [(r.agent, r.tool_name) for r in asked] == [
        (first.agent, "write"),
        (second.agent, "bash"),
    ]
