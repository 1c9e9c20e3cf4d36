"""Both bundled backends against the conformance kit (``tether.testing``): one pytest test per
backend and check."""

from __future__ import annotations

from pathlib import Path

import pytest
from conformance_support import BUNDLED

from tether.testing import BackendUnderTest, Check, applicable, run_check


@pytest.mark.parametrize(
    ("subject", "check"),
    [
        pytest.param(subject, check, id=f"{subject.name}-{check}")
        for subject in BUNDLED
        for check in applicable(subject)
    ],
)
async def test_conformance(subject: BackendUnderTest, check: Check, tmp_path: Path) -> None:
    await run_check(subject, check, tmp_path)
