"""Delegation scenarios end to end: the real ``tether`` console script in a subprocess, the
scripted model (children match script entries by depth and label), a real JSONL store and
real files. Scripts live in ``examples/delegation/`` so users can copy them.

The widen-then-cold-resume scenario runs through the Python API (:class:`Harness`): nothing
model-facing can widen a session (by design), and ``tether run --resume`` refuses
``--sandbox``, so only code can switch the parent mid-run.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from e2e_support import JsonRun, tree

from cli_support import TETHER, run_args, tether
from tether._harness import Harness
from tether.model import ScriptedModel
from tether.policy import SANDBOX_POLICY_SERVICE, SandboxMode
from tether.policy._sandbox_policy import SandboxPolicyService, fold_sandbox_mode
from tether.session import SessionStore
from tether.session.persistence import JsonlPersistence

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "delegation"
READ_ONLY_MARKER = "[sandbox: file access denied under read-only mode]"
NEVER = {"policy": "never", "source": "delegation"}

pytestmark = pytest.mark.timeout(120)


class Run(JsonRun):
    def by_label(self, env: dict[str, Any], label: str) -> str:
        """A child's id by its label. A continuable child's descriptor is part of its creation
        seed, which is never published live, so the label comes from the stored tree."""
        found: list[str] = []

        def walk(node: dict[str, Any]) -> None:
            if node["label"] == label:
                found.append(str(node["id"]))
            for sub in node["children"]:
                walk(sub)

        walk(tree(env, self.root))
        (only,) = found
        assert only in self.sessions
        return only


@pytest.fixture
def env(tmp_path: Path) -> dict[str, Any]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return {"workspace": workspace, "store": f"jsonl://{tmp_path / 'store'}", "tmp": tmp_path}


def tether_run(env: dict[str, Any], script: str, *extra: str) -> Run:
    return Run(tether(*run_args(EXAMPLES / script, env["workspace"], env["store"], *extra)))


def test_depth_two_rejection(env: dict[str, Any]) -> None:
    (env["workspace"] / "tether.toml").write_text(
        '[[plugins]]\nname = "subagents"\nconfig = { max_depth = 2 }\n'
    )
    run = tether_run(env, "depth-limit.json", "--trust-workspace")
    assert run.proc.returncode == 0, run.proc.stderr
    assert run.result["output"] == "The chain stopped at the depth limit."
    assert len(run.children()) == 2  # depth 1 and depth 2; depth 3 was never created
    level_two = run.by_label(env, "level two")
    assert [r["content"] for r in run.of_type(level_two, "tool/result")] == [
        "Error: subagent depth 3 exceeds maxDepth 2"
    ]
    node = tree(env, run.root)
    assert [c["depth"] for c in node["children"]] == [1]
    assert [c["depth"] for c in node["children"][0]["children"]] == [2]
    assert node["children"][0]["children"][0]["children"] == []


def test_dfa_parent_delegates_dfa_and_never(env: dict[str, Any]) -> None:
    run = tether_run(env, "dfa-parent.json", "--sandbox", "danger-full-access")
    assert run.proc.returncode == 0, run.proc.stderr
    (child,) = run.children()
    assert run.policy(child) == [
        ("sandbox/mode", {"mode": "danger-full-access", "source": "delegation"}),
        ("approval/policy", NEVER),
    ]
    # The write outside the workspace needs danger-full-access, which only the capture gives.
    assert (env["tmp"] / "outside.txt").read_text() == "dfa"
    assert run.result["output"] == "The writer finished."
    assert len(run.notices(run.root)) == 1


def test_grandchild_captures_from_its_parents_delegated_events(env: dict[str, Any]) -> None:
    run = tether_run(env, "grandchildren.json", "--sandbox", "danger-full-access")
    assert run.proc.returncode == 0, run.proc.stderr
    coordinator, helper = run.by_label(env, "coordinator"), run.by_label(env, "helper")
    dfa = ("sandbox/mode", {"mode": "danger-full-access", "source": "delegation"})
    assert run.policy(coordinator) == [dfa, ("approval/policy", NEVER)]
    # The helper's scope comes from the coordinator's own (delegated) log, not the root's.
    assert run.policy(helper) == [dfa, ("approval/policy", NEVER)]
    assert (env["tmp"] / "grandchild.txt").read_text() == "inherited"
    # Settlement travels up one level at a time: helper → coordinator → root.
    assert [n["source"]["sender_session_id"] for n in run.notices(coordinator)] == [helper]
    assert [n["source"]["sender_session_id"] for n in run.notices(run.root)] == [coordinator]
    assert run.result["output"] == "All done."
    node = tree(env, run.root)
    (coordinator_node,) = node["children"]
    (helper_node,) = coordinator_node["children"]
    assert (helper_node["id"], helper_node["depth"], helper_node["mode"]) == (
        helper,
        2,
        "danger-full-access",
    )
    assert (helper_node["approval"], helper_node["approval_source"]) == ("never", "delegation")


def test_child_denied_write_is_reported_back(env: dict[str, Any]) -> None:
    run = tether_run(env, "denied-write.json", "--sandbox", "read-only")
    assert run.proc.returncode == 0, run.proc.stderr
    (child,) = run.children()
    assert run.policy(child) == [
        ("sandbox/mode", {"mode": "read-only", "source": "delegation"}),
        ("approval/policy", NEVER),
    ]
    (result,) = run.of_type(child, "tool/result")
    assert result["is_error"] is True and READ_ONLY_MARKER in result["content"]
    assert not (env["workspace"] / "notes.txt").exists()
    (notice,) = run.notices(run.root)
    assert notice["content"].endswith(
        "Its closing message: Cannot write notes.txt: the sandbox denied it (read-only). "
        "This needs wider access."
    )
    assert run.result["output"] == (
        "The writer could not create notes.txt: my session is read-only."
    )


def test_parallel_background_children_with_settlement_notices(env: dict[str, Any]) -> None:
    (env["workspace"] / "seed.txt").write_text("hello\n")
    run = tether_run(env, "parallel.json")
    assert run.proc.returncode == 0, run.proc.stderr
    alpha, beta = run.by_label(env, "alpha"), run.by_label(env, "beta")
    started = [r["content"] for r in run.of_type(run.root, "tool/result")]
    assert sorted(started) == sorted([f"started subagent {alpha}", f"started subagent {beta}"])
    # Both ran in the background: the delegation returned at once ("started subagent"). Where
    # their lines fall against the root's is commit order (docs/cli.md, --json), which the
    # write-behind batch decides, so it proves nothing about when they ran.
    for child in (alpha, beta):
        assert run.of_type(child, "turn/end")[-1]["reason"] == "completed"
        # A default root is pinned to the workspace-write preset; children get it delegated.
        assert run.policy(child) == [
            ("sandbox/mode", {"mode": "workspace-write", "source": "delegation"}),
            ("approval/policy", NEVER),
        ]
    notices = run.notices(run.root)
    assert sorted(n["source"]["sender_session_id"] for n in notices) == sorted([alpha, beta])
    closing = sorted(n["content"].split("Its closing message: ")[1] for n in notices)
    assert closing == ["alpha: the workspace holds seed.txt", "beta: seed.txt says hello"]
    node = tree(env, run.root)
    assert sorted((c["label"], c["kind"], c["status"]) for c in node["children"]) == [
        ("alpha", "continuable", "completed"),
        ("beta", "continuable", "completed"),
    ]


def assert_child_kept_read_only(stored: Any, workspace: Path) -> None:
    policy = [
        (e.type, dict(e.data))
        for e in stored.events
        if e.type in ("sandbox/mode", "approval/policy")
    ]
    assert policy == [
        ("sandbox/mode", {"mode": "read-only", "source": "delegation"}),
        ("approval/policy", NEVER),
    ]
    assert fold_sandbox_mode(stored.events) is SandboxMode.READ_ONLY
    assert not (workspace / "late.txt").exists()
    results = [str(e.data["content"]) for e in stored.events if e.type == "tool/result"]
    assert READ_ONLY_MARKER in results[-1]
    assert [e.data["turn"] for e in stored.events if e.type == "turn/start"] == [1, 2]
    # The cold resume appended only its end-seed marker before the follow-up's splice.
    first_end = next(e.seq for e in stored.events if e.type == "turn/end")
    assert [e.type for e in stored.events[first_end + 1 : first_end + 3]] == [
        "session/end-seed",
        "agent/inbox/spliced",
    ]


async def test_parent_widening_after_settlement_does_not_widen_a_cold_resumed_child(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    store = JsonlPersistence(tmp_path / "store")
    model = ScriptedModel.from_path(EXAMPLES / "widen-then-resume.json")
    async with Harness.open(
        workspace=workspace, model=model, store=store, sandbox="read-only"
    ) as harness:
        first = await harness.run("start the worker")
        assert first.output == "Worker finished its first task."
        root = harness.root
        assert root is not None
        (child_id,) = [h.id for h in await store.list() if h.parent_session == root.id]
        assert harness.store.get(child_id) is None  # settled and disposed
        # The user widens the root (nothing model-facing can); the root's model then sends
        # the settled worker more work with send_message, which cold-resumes it.
        sandbox = harness.ctx.get(SANDBOX_POLICY_SERVICE)
        assert isinstance(sandbox, SandboxPolicyService)
        sandbox.set_sandbox_mode(root.session, "danger-full-access")
        second = await harness.run("send the worker more work")
        assert second.output == "Worker finished the follow-up."
    assert_child_kept_read_only(
        await JsonlPersistence(tmp_path / "store").inspect(child_id), workspace
    )


async def test_cold_resume_in_a_new_process_keeps_the_recorded_scope(
    env: dict[str, Any],
) -> None:
    first = tether_run(env, "widen-then-resume.json", "--sandbox", "read-only")
    assert first.proc.returncode == 0, first.proc.stderr
    assert first.result["output"] == "Worker finished its first task."
    (child_id,) = first.children()
    # Between the processes the user widens the stored root through the Python API (the CLI
    # can only narrow a stored session).
    store = SessionStore(JsonlPersistence(Path(env["store"].removeprefix("jsonl://"))))
    root = await store.open(first.root)
    SandboxPolicyService().set_sandbox_mode(root, "danger-full-access")
    await store.close()
    proc = subprocess.run(
        [
            TETHER,
            "run",
            "--model",
            f"scripted:{EXAMPLES / 'widen-then-resume.json'}",
            "--workspace",
            str(env["workspace"]),
            "--store",
            env["store"],
            "--resume",
            first.root,
            "--json",
            "send the worker more work",
        ],
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    second = Run(proc)
    assert proc.returncode == 0, proc.stderr
    assert second.root == first.root
    assert second.result["output"] == "Worker finished the follow-up."
    # The child was cold-resumed in the second process: its live events are in this stream,
    # and it appended no policy event of its own.
    assert second.policy(child_id) == []
    assert [line["type"] for line in second.sessions[child_id]][:2] == [
        "session/end-seed",
        "agent/inbox/spliced",
    ]
    stored = await JsonlPersistence(Path(env["store"].removeprefix("jsonl://"))).inspect(child_id)
    assert_child_kept_read_only(stored, env["workspace"])
