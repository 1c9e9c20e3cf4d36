"""The user's ``allowed-always`` rules file: private, atomic, locked, refused inside the
workspace, and never trusted when damaged (``policy/_rule_store.py``)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from tether.policy._errors import RuleStoreError
from tether.policy._modes import SandboxMode
from tether.policy._permissions import PermissionRules
from tether.policy._rule_store import RuleStore

WS = "/work/project"


def test_add_keeps_one_copy_of_a_rule_and_remove_takes_it_out(tmp_path: Path) -> None:
    store = RuleStore(tmp_path / "cfg" / "permission-rules")
    first = store.add(WS, "Bash(npm test:*)", None, session="s", approval="a", granted_by="me")
    again = store.add(WS, "Bash(npm test:*)", None)
    assert again == first
    escalated = store.add(WS, "Bash(make:*)", SandboxMode.WORKSPACE_WRITE)
    assert [r.rule for r in store.get(WS).rules] == ["Bash(npm test:*)", "Bash(make:*)"]
    raw = json.loads(store.path_for(WS).read_text())
    assert raw["workspace"] == WS and raw["rules"][1]["escalate"] == "workspace-write"
    assert store.remove(WS, first.id) == first
    assert store.remove(WS, first.id) is None
    assert store.remove(WS, escalated.id) == escalated
    assert not store.path_for(WS).exists()  # the last rule gone, the file too


def test_concurrent_adds_all_survive(tmp_path: Path) -> None:
    store = RuleStore(tmp_path / "cfg" / "permission-rules")
    threads = [
        threading.Thread(target=store.add, args=(WS, f"Bash(tool{i}:*)", None)) for i in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r.rule for r in store.get(WS).rules) == sorted(
        f"Bash(tool{i}:*)" for i in range(8)
    )


def test_a_damaged_or_open_file_is_never_used(tmp_path: Path) -> None:
    directory = tmp_path / "cfg" / "permission-rules"
    store = RuleStore(directory)
    store.add(WS, "Bash", None)
    path = store.path_for(WS)
    path.write_text('{"version": 1, "workspace": "/work/project", "rules": [{"rule": 3}]}')
    with pytest.raises(RuleStoreError) as info:
        store.get(WS)
    assert info.value.code == "RULE_STORE" and "damaged" in str(info.value)
    rules = PermissionRules(workspace=WS, store=store)
    assert rules.always() == () and rules.store_problem is not None
    path.write_text(json.dumps({"version": 1, "workspace": WS, "rules": []}))
    os.chmod(path, 0o666)
    with pytest.raises(RuleStoreError) as info:
        store.get(WS)
    assert "is not private to you" in str(info.value)


def test_rules_kept_inside_the_workspace_are_refused(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    store = RuleStore(ws / ".config" / "tether" / "permission-rules")
    assert store.refusal(str(ws)) is not None
    with pytest.raises(RuleStoreError) as info:
        store.add(str(ws), "Bash", None)
    assert "inside workspace" in str(info.value)
    assert PermissionRules(workspace=str(ws), store=store).always_refusal() is not None


def test_an_always_rule_revoked_elsewhere_stops_deciding_at_once(tmp_path: Path) -> None:
    store = RuleStore(tmp_path / "cfg" / "permission-rules")
    rules = PermissionRules(workspace=WS, store=store)
    assert rules.always() == ()
    added = store.add(WS, "Bash(ls:*)", None)
    assert [r.text for r in rules.always()] == ["Bash(ls:*)"]
    RuleStore(store.directory).remove(WS, added.id)  # another process
    assert rules.always() == ()
