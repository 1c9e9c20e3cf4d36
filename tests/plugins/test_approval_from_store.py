"""``approval_from_store``: its configuration and the command its wait hint names."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from tether.plugins.approval_from_store import ApprovalFromStoreConfig, answer_command


def test_the_hint_names_the_store_unless_it_is_the_default_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    default = f"sqlite://{tmp_path / 'data' / 'tether' / 'tether.db'}"
    assert answer_command("ap-1", default) == "tether approvals answer ap-1 allow|reject"
    spaced = f"jsonl://{tmp_path / 'my store'}"
    assert answer_command("ap-1", spaced) == (
        f"tether approvals answer ap-1 allow|reject --store 'jsonl://{tmp_path / 'my store'}'"
    )
    # TETHER_STORE may be set here and not in the other terminal: it is named
    monkeypatch.setenv("TETHER_STORE", f"sqlite://{tmp_path / 'env.db'}")
    assert answer_command("ap-1", f"sqlite://{tmp_path / 'env.db'}").endswith(
        f" --store sqlite://{tmp_path / 'env.db'}"
    )


def test_the_timeout_defaults_to_fifteen_minutes_and_zero_means_no_deadline() -> None:
    assert ApprovalFromStoreConfig(store="sqlite:///s.db").timeout_seconds == 900
    assert ApprovalFromStoreConfig(store="sqlite:///s.db", timeout_seconds=0).timeout_seconds == 0
    for bad in (-1, float("nan"), float("inf")):
        with pytest.raises(ValidationError):
            ApprovalFromStoreConfig(store="sqlite:///s.db", timeout_seconds=bad)
