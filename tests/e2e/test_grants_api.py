"""Grants from Python: an approver callable that returns an ``Answer`` with a scope, the
harness's ``grants()`` and ``revoke_grant()``."""

from __future__ import annotations

from pathlib import Path

import pytest

from script_support import call, script
from tether import Answer, ApprovalRequest, Harness
from tether.policy._errors import GrantNotFoundError


async def test_an_approver_callable_grants_and_the_harness_lists_and_revokes(
    tmp_path: Path,
) -> None:
    steps = [call("write", path="notes/a.txt", content="a"), {"text": "one"}]
    steps += [call("write", path="notes/b.txt", content="b"), {"text": "two"}]
    steps += [call("write", path="notes/c.txt", content="c"), {"text": "three"}]
    model = script(tmp_path / "s.json", steps)
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> Answer | str:
        asked.append(request)
        if len(asked) == 1:
            assert request.choices is not None
            return Answer("allowed-for-session", "my approver", request.choices.scopes[1])
        return "rejected"

    async with Harness.open(
        workspace=tmp_path,
        model=f"scripted:{model}",
        store=f"sqlite:///{tmp_path / 'h.db'}",
        approver=approver,
        plugins=["ask_tools"],
    ) as harness:
        assert harness.grants() == []
        await harness.run("first")
        [grant] = harness.grants()
        assert (grant.kind, grant.rule, grant.by) == ("session", "Write(./notes/**)", "my approver")
        await harness.run("second")  # decided by the grant
        assert len(asked) == 1 and (tmp_path / "notes" / "b.txt").exists()
        revoked = await harness.revoke_grant(grant.id[:6])
        assert revoked.id == grant.id and harness.grants() == []
        with pytest.raises(GrantNotFoundError):
            await harness.revoke_grant(grant.id)
        await harness.run("third")  # asked again, rejected
        assert len(asked) == 2 and not (tmp_path / "notes" / "c.txt").exists()
        assert harness.root is not None
        stored = await harness.store.persistence.inspect(harness.root.id)  # type: ignore[union-attr]
    revocations = [e.data for e in stored.events if e.type == "approval/grant-revoked"]
    assert revocations == [{"id": grant.id, "by": "Harness.revoke_grant"}]
