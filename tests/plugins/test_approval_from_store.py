"""``approval_from_store``: its configuration, the store it watches and the command its wait
hint names."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from tether._harness import Harness
from tether.kernel import PluginConfigError, PluginEntry
from tether.plugins._approval_from_store import ApprovalFromStoreConfig, answer_command


def test_the_hint_names_the_store_unless_it_is_the_default_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    default = f"sqlite:///{tmp_path / 'data' / 'tether' / 'tether.db'}"
    plain = ("allowed-once", "rejected")
    assert answer_command("ap-1", default, plain) == "tether approvals answer ap-1 allow|reject"
    spaced = f"jsonl://{tmp_path / 'my store'}"
    assert answer_command("ap-1", spaced, plain) == (
        f"tether approvals answer ap-1 allow|reject --store 'jsonl://{tmp_path / 'my store'}'"
    )
    # the answers a question offers, in the command's order
    session_only = ("allowed-once", "allowed-for-session", "rejected")
    assert answer_command("ap-1", default, session_only[::-1]) == (
        "tether approvals answer ap-1 allow|allow-session|reject"
    )
    # TETHER_STORE may be set here and not in the other terminal: it is named
    monkeypatch.setenv("TETHER_STORE", f"sqlite:///{tmp_path / 'env.db'}")
    assert answer_command("ap-1", f"sqlite:///{tmp_path / 'env.db'}", plain).endswith(
        f" --store sqlite:///{tmp_path / 'env.db'}"
    )


def test_the_timeout_defaults_to_fifteen_minutes_and_zero_means_no_deadline() -> None:
    assert ApprovalFromStoreConfig(store="sqlite:///s.db").timeout_seconds == 900
    assert ApprovalFromStoreConfig(store="sqlite:///s.db", timeout_seconds=0).timeout_seconds == 0
    for bad in (-1, float("nan"), float("inf")):
        with pytest.raises(ValidationError):
            ApprovalFromStoreConfig(store="sqlite:///s.db", timeout_seconds=bad)


async def test_it_watches_the_runs_own_store_and_refuses_another(tmp_path: Path) -> None:
    """Only the run's own store (its answer box included) is hidden from the run's commands,
    so the answerer takes the store from the run and refuses a configured other one."""
    own = f"jsonl://{tmp_path / 'own'}"
    other = f"jsonl://{tmp_path / 'other'}"
    (tmp_path / "ws").mkdir()
    script = tmp_path / "script.json"
    script.write_text('{"agents": [{"match": {}, "steps": [{"text": "hi"}]}]}')
    model = f"scripted:{script}"
    entry = PluginEntry(name="approval_from_store", config={"store": other})
    with pytest.raises(PluginConfigError) as err:
        async with Harness.open(workspace=tmp_path / "ws", model=model, store=own, plugins=[entry]):
            pass
    assert str(err.value).endswith(
        f"approval_from_store: store {other!r} is not the run's store {own!r}; only the "
        "run's own answer box is hidden from its commands (leave store out)"
    )
    same = PluginEntry(name="approval_from_store", config={"store": own})
    async with Harness.open(workspace=tmp_path / "ws", model=model, store=own, plugins=[same]):
        pass
