"""Root-routed subagent approvals end to end (issue 6): the real ``tether`` console script in a
subprocess, the scripted model (scripts in ``examples/routing/``), a workspace ``tether.toml``
loading ``root_approvals`` (``bash`` under the OS sandbox comes by default), a real JSONL store,
real files, and a real ``--approver`` program.

Nothing here waits on a clock for correctness: where an order matters, one side polls for a
file the other side writes (the approver's marker, the root's stored ``turn/end``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from e2e_support import JsonRun as Run
from e2e_support import stored, tree

from cli_support import TETHER, run_args, tether

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "routing"
READ_ONLY_MARKER = "[sandbox: file access denied under read-only mode]"
NOTES_HEADLINE = (
    'Subagent approval: run "write" · Arguments: {"content": "notes"} · Path: notes.txt'
)
NEVER = {"policy": "never", "source": "delegation"}

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, Any]:
    workspace = tmp_path / "ws"
    (workspace / "out").mkdir(parents=True)  # where commands write (not the workspace root)
    return {
        "workspace": workspace,
        "tmp": tmp_path,
        "store_dir": tmp_path / "store",
        "store": f"jsonl://{tmp_path / 'store'}",
    }


REVIEWER_INSTANCES = (
    '[[plugins]]\nname = "subagents"\nconfig = { instances = [ { name = "subagent" }, '
    '{ name = "reviewer", sandbox = "read-only", background_mode = "one-shot" } ] }\n'
)


def configure(env: dict[str, Any], guarded: list[str] | None, *, extra: str = "") -> None:
    """The workspace ``tether.toml``. ``sandbox`` and ``bash`` come with the default
    composition."""
    text = extra
    if guarded is not None:
        text += (
            f'\n[[plugins]]\nname = "root_approvals"\nconfig = {{ guarded = {json.dumps(guarded)}'
            " }\n"
        )
    (env["workspace"] / "tether.toml").write_text(text)


def approver(env: dict[str, Any], answer: str, *, body: str = "") -> str:
    """A program that records each request (one JSON line) and answers ``answer``; ``body``
    runs in between (``request`` is the parsed request)."""
    program = env["tmp"] / "approver.py"
    program.write_text(
        "import json, subprocess, sys, time\n"
        "from pathlib import Path\n"
        "request = json.loads(sys.stdin.read())\n"
        f"with open({str(env['tmp'] / 'asked.jsonl')!r}, 'a') as out:\n"
        "    out.write(json.dumps(request) + '\\n')\n"
        f"{body}"
        f"print({answer!r})\n"
    )
    return f"{sys.executable} {program}"


def asked(env: dict[str, Any]) -> list[dict[str, Any]]:
    path = env["tmp"] / "asked.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def tether_run(env: dict[str, Any], script: str, *extra: str) -> Run:
    # The workspace's tether.toml is the test's own: trusted for each run, as CI would.
    return Run(
        tether(
            *run_args(
                EXAMPLES / script, env["workspace"], env["store"], "--trust-workspace", *extra
            )
        )
    )


def routed_pair(run: Run, child: str, tool: str, reason: str, outcome: str) -> list[Any]:
    """The expected child-side layout of one routed call: call, asked, decided, result. The
    ask's ``action`` is the call's exact command or path."""
    calls = [c for c in run.of_type(child, "tool/call") if c["name"] == tool]
    ids = [a for a in run.of_type(child, "approval/asked") if a["tool_name"] == tool]
    assert len(calls) == len(ids) == 1
    args = json.loads(calls[0]["arguments"])
    return [
        ("tool/call", calls[0]),
        (
            "approval/asked",
            {
                "id": ids[0]["id"],
                "tool_name": tool,
                "call_id": calls[0]["call_id"],
                "reason": reason,
                "routed_to": run.root,
                "action": {
                    "tool": tool,
                    **{k: args[k] for k in ("command", "path") if k in args},
                },
            },
        ),
        ("approval/decided", {"id": ids[0]["id"], "outcome": outcome}),
    ]


# -- a foreground child, approved and still confined ---------------------------------------------
def test_a_foreground_childs_bash_is_approved_by_the_root_and_stays_confined(
    env: dict[str, Any],
) -> None:
    configure(env, ["bash", "write"], extra=REVIEWER_INSTANCES)
    run = tether_run(env, "foreground-reviewer.json", "--approver", approver(env, "allowed-once"))
    assert run.proc.returncode == 0, run.proc.stderr
    assert run.result["output"] == "The reviewer finished."
    (child,) = run.children()
    # the reviewer instance caps the child at read-only under the workspace-write root
    assert run.of_type(child, "sandbox/mode") == [{"mode": "read-only", "source": "delegation"}]
    assert run.of_type(child, "approval/policy") == [NEVER]
    bash_reason = (
        'Subagent approval: run "bash" · Why: "write the notes file" · Command: echo ran; '
        "echo notes > notes.txt"
    )
    audit = run.audit(child)
    bash_result, write_result = run.of_type(child, "tool/result")
    assert audit == [
        *routed_pair(run, child, "bash", bash_reason, "allowed-once"),
        ("tool/result", bash_result),
        *routed_pair(run, child, "write", NOTES_HEADLINE, "allowed-once"),
        ("tool/result", write_result),
    ]
    # approved, so the command ran; confined, so its write was denied (a denial may carry a
    # guidance line after the marker)
    assert bash_result["is_error"] is True
    assert bash_result["content"].startswith("ran\n")
    assert READ_ONLY_MARKER in bash_result["content"]
    assert write_result["content"].splitlines()[0] == (
        f"Error: cannot write notes.txt: the sandbox is read-only {READ_ONLY_MARKER}"
    )
    assert not (env["workspace"] / "notes.txt").exists()
    # the root's log holds each question, pending then decided, with the lineage
    pending = run.of_type(run.root, "approval/pending")
    assert [(p["state"], p.get("tool_name"), p.get("outcome")) for p in pending] == [
        ("pending", "bash", None),
        ("decided", None, "allowed-once"),
        ("pending", "write", None),
        ("decided", None, "allowed-once"),
    ]
    assert pending[0]["child_session"] == child and pending[0]["lineage"] == [child, run.root]
    # the answerer saw the child's question (its session and approval id), decided by the
    # root, with the headline and the structured origin
    requests = asked(env)
    assert [(r["session_id"], r["tool_name"], r["reason"]) for r in requests] == [
        (child, "bash", bash_reason),
        (child, "write", NOTES_HEADLINE),
    ]
    assert {r["origin"]["decided_by"] for r in requests} == {run.root}
    assert [r["call_id"] for r in requests] == [
        c["call_id"] for c in run.of_type(child, "tool/call")
    ]
    assert requests[0]["action"] == {
        "tool": "bash",
        "command": "echo ran; echo notes > notes.txt",
        "description": "write the notes file",
    }
    # the parent heard about both scope denials
    notices = [
        m["content"]
        for m in run.of_type(run.root, "user/message")
        if m["source"].get("plugin") == "root_approvals"
    ]
    assert len(notices) == 2
    assert notices[1] == (
        f"Subagent {child}'s write call was denied by its scope: "
        + " ".join(write_result["content"].split())[:300]
    )
    # the durable logs say the same
    durable = [(e["type"], e["data"]) for e in stored(env, child)]
    assert [d for d in durable if d[0].startswith(("approval/a", "approval/d"))] == [
        a for a in audit if a[0].startswith("approval/")
    ]


@pytest.mark.parametrize("answer", ["allowed-once", "rejected"])
def test_a_foreground_childs_bash_runs_only_when_the_root_approves(
    env: dict[str, Any], answer: str
) -> None:
    configure(env, ["bash"])
    run = tether_run(env, "foreground-writer.json", "--approver", approver(env, answer))
    assert run.proc.returncode == 0, run.proc.stderr
    (child,) = run.children()
    (request,) = asked(env)
    assert request["reason"] == (
        'Subagent approval: run "bash" · Why: "create ran.txt" · Command: echo ran > out/ran.txt'
    )
    (result,) = run.of_type(child, "tool/result")
    if answer == "allowed-once":
        assert (env["workspace"] / "out" / "ran.txt").read_text() == "ran\n"
        assert (result["content"], result["is_error"]) == ("exit code: 0", False)
    else:
        assert not (env["workspace"] / "out" / "ran.txt").exists()
        assert result["content"] == (
            "Error: the root session's user rejected this subagent's \"bash\" call"
        )
    assert [kind for kind, _ in run.audit(child)] == [
        "tool/call",
        "approval/asked",
        "approval/decided",
        "tool/result",
    ]
    assert run.of_type(child, "approval/decided")[0]["outcome"] == answer


def test_without_the_plugin_a_childs_ask_is_still_rejected_by_its_pin(
    env: dict[str, Any],
) -> None:
    configure(env, None)
    run = tether_run(
        env,
        "foreground-writer.json",
        "--plugin",
        "ask_tools",
        "--approver",
        approver(env, "allowed-once"),
    )
    assert run.proc.returncode == 0, run.proc.stderr
    (child,) = run.children()
    assert asked(env) == []  # the pin rejects before any answerer
    (result,) = run.of_type(child, "tool/result")
    assert result["content"] == 'Error: the user rejected tool "bash"'
    assert run.of_type(child, "approval/decided")[0]["outcome"] == "rejected"
    assert "routed_to" not in run.of_type(child, "approval/asked")[0]
    assert run.of_type(run.root, "approval/pending") == []
    assert not (env["workspace"] / "out" / "ran.txt").exists()


# -- a background child asking while the root is idle ------------------------------------------
IDLE_WATCHER = """
import glob, pathlib, sys, time
store, marker = sys.argv[1], pathlib.Path(sys.argv[2])
for _ in range(3000):
    for log in glob.glob(store + "/*/session.jsonl"):
        if any(line.startswith('{"type":"turn/end"') for line in open(log)):
            marker.write_text("idle")
            sys.exit(0)
    time.sleep(0.01)
"""


def test_a_background_child_asks_while_the_root_is_idle(env: dict[str, Any]) -> None:
    # The child asks only once its root is idle. No confined command can read the store, so
    # a watcher outside the sandbox reads the root's stored turn/end and says so in a file the
    # child's (sandboxed) bash waits for.
    (env["workspace"] / "signals").mkdir()
    marker = env["workspace"] / "signals" / "root-idle"
    watcher = subprocess.Popen(
        [sys.executable, "-c", IDLE_WATCHER, str(env["store_dir"]), str(marker)]
    )
    configure(env, ["write"])
    try:
        run = tether_run(
            env, "background-idle-root.json", "--approver", approver(env, "allowed-once")
        )
    finally:
        watcher.kill()
        watcher.wait()
    assert run.proc.returncode == 0, run.proc.stderr
    assert run.result["output"] == "The worker wrote done.txt."
    (child,) = run.children()
    assert (env["workspace"] / "done.txt").read_text() == "done"
    # On the root: turn 1 ended, then the question was pending and decided, then the
    # settlement turn. No turn was opened for the question.
    root_kinds = [
        line["type"]
        for line in run.sessions[run.root]
        if line["type"] in ("turn/start", "turn/end", "approval/pending")
    ]
    assert root_kinds == [
        "turn/start",
        "turn/end",
        "approval/pending",
        "approval/pending",
        "turn/start",
        "turn/end",
    ]
    pending, decided = run.of_type(run.root, "approval/pending")
    write_call = next(c for c in run.of_type(child, "tool/call") if c["name"] == "write")
    assert pending == {
        "id": pending["id"],
        "state": "pending",
        "child_session": child,
        "tool_name": "write",
        "call_id": write_call["call_id"],
        "reason": 'Subagent approval: run "write" · Arguments: {"content": "done"} · '
        "Path: done.txt",
        "lineage": [child, run.root],
    }
    assert decided == {"id": pending["id"], "state": "decided", "outcome": "allowed-once"}
    # On the child: the audit pair inside its own turn, before the write ran.
    child_kinds = run.kinds(child)
    asked_at = child_kinds.index("approval/asked")
    assert child_kinds[asked_at - 1 : asked_at + 3] == [
        "tool/call",
        "approval/asked",
        "approval/decided",
        "tool/result",
    ]
    assert child_kinds.index("turn/start") < asked_at < child_kinds.index("turn/end")
    assert run.of_type(child, "approval/asked")[0]["routed_to"] == run.root
    assert run.of_type(child, "tool/result")[-1]["content"] == "Wrote 4 bytes to done.txt"
    # Both sides are durable.
    assert [e["data"] for e in stored(env, run.root) if e["type"] == "approval/pending"] == [
        pending,
        decided,
    ]
    assert [e["type"] for e in stored(env, child) if e["type"].startswith("approval/")] == [
        "approval/policy",
        "approval/asked",
        "approval/decided",
    ]
    (request,) = asked(env)
    assert request["session_id"] == child and request["call_id"] == write_call["call_id"]
    assert request["origin"]["decided_by"] == run.root


# -- a grandchild's question ------------------------------------------------------------------
def test_a_grandchilds_question_reaches_the_root(env: dict[str, Any]) -> None:
    configure(env, ["write"])
    run = tether_run(env, "grandchild.json", "--approver", approver(env, "allowed-once"))
    assert run.proc.returncode == 0, run.proc.stderr
    assert run.result["output"] == "All done."
    assert (env["workspace"] / "grandchild.txt").read_text() == "from the helper"
    node = tree(env, run.root)
    (coordinator_node,) = node["children"]
    (helper_node,) = coordinator_node["children"]
    coordinator, helper = coordinator_node["id"], helper_node["id"]
    assert (coordinator_node["label"], helper_node["label"], helper_node["depth"]) == (
        "coordinator",
        "helper",
        2,
    )
    (request,) = asked(env)
    assert (request["session_id"], request["delegation_depth"]) == (helper, 2)
    assert request["origin"]["lineage"][-1] == run.root
    pending, decided = run.of_type(run.root, "approval/pending")
    assert (pending["child_session"], pending["lineage"]) == (
        helper,
        [helper, coordinator, run.root],
    )
    assert decided["outcome"] == "allowed-once"
    assert run.of_type(helper, "approval/asked")[0]["routed_to"] == run.root
    # the coordinator in between neither asked nor recorded anything
    assert run.of_type(coordinator, "approval/asked") == []
    assert run.of_type(coordinator, "approval/pending") == []
    assert [node["blocked"], coordinator_node["blocked"], helper_node["blocked"]] == [None] * 3


# -- blocked while the approver holds the answer, denied afterwards -------------------------------
def test_list_agents_and_the_tree_show_blocked_then_denied(env: dict[str, Any]) -> None:
    configure(env, ["write"])
    hold = (
        # the stored tree, while the question is open (retried until the child is stored)
        "for _ in range(500):\n"
        f"    tree = subprocess.run([{TETHER!r}, 'sessions', 'tree', request['origin']['decided_by'],\n"
        f"                           '--store', {env['store']!r}, '--json'],\n"
        "                          capture_output=True, text=True)\n"
        "    if 'blocked: waiting' in tree.stdout:\n"
        "        break\n"
        "    time.sleep(0.02)\n"
        f"Path({str(env['tmp'] / 'tree-while-blocked.json')!r}).write_text(tree.stdout)\n"
        # let the root see the open question, then hold the answer until the root is idle
        f"Path({str(env['workspace'] / 'approver-called')!r}).write_text('')\n"
        f"log = Path({str(env['store_dir'])!r}) / request['origin']['decided_by'] / 'session.jsonl'\n"
        "for _ in range(3000):\n"
        '    if any(l.startswith(\'{"type":"turn/end"\') for l in log.read_text().splitlines()):\n'
        "        break\n"
        "    time.sleep(0.01)\n"
    )
    run = tether_run(
        env, "blocked-then-denied.json", "--approver", approver(env, "rejected", body=hold)
    )
    assert run.proc.returncode == 0, run.proc.stderr
    assert run.result["output"] == "The writer was denied."
    (child,) = run.children()
    listed = [
        r["content"] for r in run.of_type(run.root, "tool/result") if r["name"] == "list_agents"
    ]
    assert listed == [
        f"{child} writer: running; blocked: waiting for approval ({NOTES_HEADLINE})",
        f"{child} writer: ready; denied: write (the root session's user rejected this "
        'subagent\'s "write" call)',
    ]
    assert not (env["workspace"] / "notes.txt").exists()
    while_blocked = json.loads((env["tmp"] / "tree-while-blocked.json").read_text())
    (child_node,) = while_blocked["children"]
    assert child_node["id"] == child
    assert child_node["blocked"] == f"blocked: waiting for approval ({NOTES_HEADLINE})"
    assert while_blocked["blocked"] is None  # the root itself is not blocked
    after = tree(env, run.root)
    (child_node,) = after["children"]
    assert child_node["blocked"] is None
    assert child_node["denied"] == (
        "denied: write (the root session's user rejected this subagent's \"write\" call)"
    )
    text = tether("sessions", "tree", run.root, "--store", env["store"]).stdout.splitlines()
    assert text[1].endswith(
        "completed  denied: write (the root session's user rejected this subagent's \"write\" call)"
    )
    # The question was answered only after the root's first turn ended: the root's record
    # was decided while the root was idle.
    root_kinds = [
        line["type"]
        for line in run.sessions[run.root]
        if line["type"] in ("turn/start", "turn/end", "approval/pending")
    ]
    assert root_kinds == [
        "turn/start",
        "approval/pending",
        "turn/end",
        "approval/pending",
        "turn/start",
        "turn/end",
    ]


# -- narrowing from the command line ------------------------------------------------------------
def test_sessions_narrow_narrows_a_stored_child_and_never_widens(env: dict[str, Any]) -> None:
    configure(env, ["bash"])
    run = tether_run(env, "foreground-writer.json", "--approver", approver(env, "allowed-once"))
    assert run.proc.returncode == 0, run.proc.stderr
    (child,) = run.children()
    narrowed = tether("sessions", "narrow", child, "read-only", "--store", env["store"])
    assert (narrowed.returncode, narrowed.stdout) == (0, f"{child}: narrowed to read-only\n")
    again = tether("sessions", "narrow", child, "read-only", "--store", env["store"])
    assert (again.returncode, again.stdout) == (0, f"{child}: already read-only\n")
    widened = tether("sessions", "narrow", child, "workspace-write", "--store", env["store"])
    assert widened.returncode == 1
    assert widened.stderr == (
        f'tether: CANNOT_NARROW: cannot widen subagent {child} from "read-only" to '
        '"workspace-write": a child\'s scope can only be narrowed\n'
    )
    top = tether("sessions", "narrow", run.root, "read-only", "--store", env["store"])
    assert top.returncode == 1
    assert top.stderr == (
        f"tether: CANNOT_NARROW: session {run.root} is not a subagent; use /permission instead\n"
    )
    policy = [
        (e["type"], e["data"])
        for e in stored(env, child)
        if e["type"] in ("sandbox/mode", "approval/policy")
    ]
    assert policy == [
        ("sandbox/mode", {"mode": "workspace-write", "source": "delegation"}),
        ("approval/policy", NEVER),
        ("sandbox/mode", {"mode": "read-only", "source": "parent"}),
    ]
    (node,) = tree(env, run.root)["children"]
    assert (node["mode"], node["mode_source"]) == ("read-only", "parent")


def test_the_approver_payload_names_the_childs_question(env: dict[str, Any]) -> None:
    configure(env, ["bash"])
    run = tether_run(env, "foreground-writer.json", "--approver", approver(env, "rejected"))
    (child,) = run.children()
    (request,) = asked(env)
    assert request["approval_id"] == run.of_type(child, "approval/asked")[0]["id"]
    assert request["origin"]["child_session_id"] == child
