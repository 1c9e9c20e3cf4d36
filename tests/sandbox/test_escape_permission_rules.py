"""An agent cannot give itself a grant or a rule, on either backend (``tether run``, a scripted
model, the real sandbox): not by writing the user's ``allowed-always`` rules file (the
configuration directory is hidden from commands and file tools), and not by planting a
``.claude/settings.json`` whose ``allow`` would skip the next run's questions (its rules apply
only once the user trusted that content). The host is checked after every attempt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import Host

from cli_support import ASK_EVERY_CALL, tether
from tether.policy._rule_store import RULES_DIR, RuleStore

pytestmark = pytest.mark.timeout(120)

BACKENDS = [pytest.param("bwrap", marks=pytest.mark.bwrap), "landlock"]


def env_for(host: Host, backend: str) -> dict[str, str]:
    """The user's config dir under the host layout (outside /tmp, which bubblewrap replaces:
    a write there would land in the command's own tmpfs and prove nothing)."""
    return {
        **os.environ,
        "XDG_CONFIG_HOME": str(host.top / "config"),
        "TETHER_SANDBOX_DISABLE": "bwrap" if backend == "landlock" else "",
    }


def model(host: Host, steps: list[dict[str, Any]], name: str) -> Path:
    path = host.top / name
    path.write_text(json.dumps({"agents": [{"match": {}, "steps": steps}]}))
    return path


def bash(command: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}


def write(path: str, content: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "write", "arguments": {"path": path, "content": content}}]}


def run(host: Host, backend: str, script: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return tether(
        "run",
        "--model",
        f"scripted:{script}",
        "--workspace",
        str(host.ws),
        "--store",
        f"jsonl://{host.top / 'store'}",
        "--json",
        *extra,
        "go",
        env=env_for(host, backend),
    )


def run_asked(
    host: Host, backend: str, script: Path, approver: Path
) -> subprocess.CompletedProcess[str]:
    """A workspace-write run whose every tool call asks the Python program ``approver``."""
    return run(host, backend, script, *ASK_EVERY_CALL, "--approver", f"{sys.executable} {approver}")


def results(done: subprocess.CompletedProcess[str]) -> list[str]:
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return [str(e["data"]["content"]) for e in lines if e.get("type") == "tool/result"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_agent_cannot_write_the_users_rules_file(host: Host, backend: str) -> None:
    config = host.top / "config" / "tether"
    config.mkdir(parents=True)
    (config / "tether.toml").write_text("# mine\n")  # as on a machine in use
    rules = config / RULES_DIR
    target = RuleStore(rules).path_for(str(host.ws))
    body = json.dumps(
        {
            "version": 1,
            "workspace": str(host.ws),
            "rules": [{"id": "x", "rule": "Bash", "escalate": "danger-full-access",
                       "added_at": 1, "session": None, "approval": None, "granted_by": None}],
        }
    )  # fmt: skip
    steps = [
        bash(f"mkdir -p {rules} && printf %s '{body}' > {target}"),
        bash(f"cat {config}/tether.toml"),
        write(str(target), body),
        write(str(config / "tether.toml"), '[permissions]\nallow = ["Bash"]\n'),
        {"text": "done"},
    ]
    before = host.snapshot(include_ws=False)
    done = run(host, backend, model(host, steps, "plant.json"), "--sandbox", "workspace-write")
    assert done.returncode == 0, done.stderr
    out = results(done)
    assert "[sandbox: file access denied under workspace-write mode]" in out[0], out[0]
    assert "# mine" not in out[1]  # the directory is hidden: nothing in it can be read
    assert out[2].startswith(f"Error: cannot write {target}: it is outside the workspace")
    assert out[3].startswith(f"Error: cannot write {config / 'tether.toml'}: it is outside")
    assert not rules.exists()
    assert (config / "tether.toml").read_text() == "# mine\n"
    after = host.snapshot(include_ws=False)
    config_before = {k: v for k, v in before.items() if k.startswith(("config", "outside", "home"))}
    config_after = {k: v for k, v in after.items() if k.startswith(("config", "outside", "home"))}
    assert config_after == config_before


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_planted_claude_allow_skips_no_question_until_trusted(host: Host, backend: str) -> None:
    settings = host.ws / ".claude" / "settings.json"
    settings.parent.mkdir()
    # planted as an agent would if it could (a workspace-write agent cannot: .claude/ is a
    # control path); the next run must still ask
    settings.write_text(json.dumps({"permissions": {"allow": ["Bash", "Write"]}}))
    log = host.outside / "asked"
    approver = host.top / "reject.py"
    approver.write_text(f"import sys\nopen({str(log)!r}, 'a').write('x')\nprint('rejected')\n")
    steps = [bash("echo planted > out.txt"), {"text": "done"}]
    done = run_asked(host, backend, model(host, steps, "ask.json"), approver)
    assert done.returncode == 0, done.stderr
    assert results(done) == ['Error: the user rejected tool "bash"']
    assert log.read_text() == "x"  # asked, not allowed by the planted rule
    assert not (host.ws / "out.txt").exists()
    assert "has permissions rules (allow: 2) that are not applied" in done.stderr


PREFIX_PICKER = """
import json, sys
request = json.load(sys.stdin)
with open({log!r}, "a") as log:
    log.write(json.dumps([s["rule"] for s in request["scopes"]]) + "\\n")
if len(open({log!r}).readlines()) > 1:
    print("rejected")
elif any(s["kind"] == "prefix" for s in request["scopes"]):
    print(json.dumps({{"outcome": "allowed-for-session", "scope": {{"kind": "prefix"}}}}))
else:
    print("allowed-for-session")
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_wrapper_command_is_offered_no_prefix_that_covers_any_program(
    host: Host, backend: str
) -> None:
    """The model writes the command a grant's scope is computed from: ``timeout 5 true`` would
    offer ``Bash(timeout 5:*)``, a prefix that reads as narrow and covers any program (``timeout
    5 touch …``, ``timeout 5 rm …``). Such a command is offered no prefix; the answerer takes the exact command, and
    the next command asks again."""
    log = host.outside / "asked"
    approver = host.top / "prefix.py"
    approver.write_text(PREFIX_PICKER.format(log=str(log)))
    steps = [
        bash("timeout 5 true"),
        bash("timeout 5 touch src/pwned"),
        {"text": "done"},
    ]
    done = run_asked(host, backend, model(host, steps, "wrapper.json"), approver)
    assert done.returncode == 0, done.stderr
    asked = [json.loads(line) for line in log.read_text().splitlines()]
    assert asked == [
        ["Bash(timeout 5 true)", "Bash"],
        ["Bash(timeout 5 touch src/pwned)", "Bash"],
    ]
    assert results(done)[1] == 'Error: the user rejected tool "bash"'
    assert not (host.ws / "src" / "pwned").exists()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_deny_holds_in_a_workspace_whose_name_has_wildcard_characters(
    host: Host, backend: str
) -> None:
    """A workspace ``proj[1]``: its path is joined to a rule's pattern as a path, so the user's
    ``deny`` of ``./secrets/**`` covers its secrets (read as a pattern, ``proj[1]`` matched
    ``proj1`` only, and the deny covered nothing here)."""
    config = host.top / "config" / "tether"
    config.mkdir(parents=True)
    (config / "tether.toml").write_text('[permissions]\ndeny = ["Read(./secrets/**)"]\n')
    ws = host.top / "proj[1]"
    (ws / "secrets").mkdir(parents=True)
    (ws / "secrets" / "key").write_text("must-not-leak\n")
    steps = [
        {"tool_calls": [{"name": "read", "arguments": {"path": "secrets/key"}}]},
        {"text": "done"},
    ]
    done = tether(
        "run", "--model", f"scripted:{model(host, steps, 'read.json')}", "--workspace", str(ws),
        "--store", f"jsonl://{host.top / 'store'}", "--json", "--sandbox", "workspace-write", "go",
        env=env_for(host, backend),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert results(done) == [
        f'Error: tool "read" is refused by the deny rule "Read(./secrets/**)" (from {config}'
        "/tether.toml)"
    ]
    assert "must-not-leak" not in done.stdout


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_deny_on_commands_sees_through_a_login_shell(host: Host, backend: str) -> None:
    """``bash -lc 'touch …'`` (how Codex runs every command) and ``env -S '…'``: the string a
    shell runs is read for a ``deny`` whatever its option cluster."""
    config = host.top / "config" / "tether"
    config.mkdir(parents=True)
    (config / "tether.toml").write_text('[permissions]\ndeny = ["Bash(touch:*)"]\n')
    steps = [
        bash("bash -lc 'touch src/one'"),
        bash("sh -xc 'touch src/two'"),
        bash("env -S 'touch src/three'"),
        {"text": "done"},
    ]
    done = run(host, backend, model(host, steps, "login.json"), "--sandbox", "workspace-write")
    assert done.returncode == 0, done.stderr
    refusal = (
        f'Error: tool "bash" is refused by the deny rule "Bash(touch:*)" (from {config}'
        "/tether.toml)"
    )
    assert results(done) == [refusal] * 3
    assert sorted(os.listdir(host.ws / "src")) == []
