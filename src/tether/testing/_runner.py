"""Run the specs against a backend under test and report what passed, failed or was skipped."""

from __future__ import annotations

import tempfile
import traceback
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tether.errors import TetherError
from tether.testing._capabilities import Capability
from tether.testing._checks import Check, Trial, open_handle
from tether.testing._subject import BackendUnderTest
from tether.testing.spec import SPECS

Status = Literal["passed", "failed", "skipped"]
"""``skipped``: the backend under test does not claim a capability the check needs."""


class AssertsDisabledError(TetherError):
    """Python runs with ``-O``, which strips the asserts every check is made of."""

    code = "ASSERTS_DISABLED"


def all_checks() -> list[Check]:
    """Every check of every spec, in report order."""
    return [check for spec in SPECS for check in spec.checks]


def applicable(subject: BackendUnderTest) -> list[Check]:
    """The checks whose needs ``subject`` has."""
    return [check for check in all_checks() if check.needs <= subject.claims()]


async def run_check(subject: BackendUnderTest, check: Check, root: Path) -> None:
    """Run one check with storage under ``root`` (an empty directory); raise if it fails.

    Runs whatever ``subject`` claims: a test framework adapter picks checks with
    :func:`applicable` and reports each failure its own way.
    """
    _require_asserts()
    handle = await open_handle(subject, root)
    try:
        await check.body(Trial(subject, root, handle))
    finally:
        await handle.close()


def _require_asserts() -> None:
    if not __debug__:
        # Every check would pass without checking anything.
        raise AssertsDisabledError(
            "python -O strips the asserts the conformance checks are made of; run without -O"
        )


@dataclass(frozen=True, slots=True)
class CheckResult:
    check: str
    """``spec/check``, e.g. ``append/append_with_gap_raises_seq_conflict``."""
    status: Status
    detail: str = ""
    """Why it failed (the traceback), or which claims a skipped check needed."""


@dataclass(frozen=True, slots=True)
class Report:
    subject: str
    results: tuple[CheckResult, ...]

    @property
    def ok(self) -> bool:
        """No check failed (skipped ones are fine: the backend did not claim them)."""
        return not self.of("failed")

    def of(self, status: Status) -> list[CheckResult]:
        return [result for result in self.results if result.status == status]

    def format(self) -> str:
        """One line per check, each failure's detail, and a summary line."""
        lines = [f"{r.status.upper():7} {r.check}" for r in self.results]
        for result in self.of("skipped"):
            lines.append(f"skipped {result.check}: {result.detail}")
        for result in self.of("failed"):
            lines += ["", f"FAILED {result.check}", result.detail.rstrip("\n")]
        counts = ", ".join(
            f"{len(self.of(status))} {status}" for status in ("passed", "failed", "skipped")
        )
        lines.append(f"{self.subject}: {counts}")
        return "\n".join(lines)


async def run_conformance(
    subject: BackendUnderTest, *, only: Iterable[Capability] | None = None
) -> Report:
    """Every check (or those of the specs in ``only``) against ``subject``, each with a fresh
    temporary storage root. A check whose needs ``subject`` does not claim is skipped.
    Raises :class:`AssertsDisabledError` under ``python -O``."""
    _require_asserts()
    wanted = None if only is None else frozenset(only)
    results: list[CheckResult] = []
    for check in all_checks():
        if wanted is not None and check.capability not in wanted:
            continue
        missing = check.needs - subject.claims()
        if missing:
            claims = ", ".join(sorted(capability.value for capability in missing))
            results.append(CheckResult(str(check), "skipped", f"not claimed: {claims}"))
            continue
        with tempfile.TemporaryDirectory(prefix="tether-conformance-") as root:
            try:
                await run_check(subject, check, Path(root))
            except Exception:
                results.append(CheckResult(str(check), "failed", traceback.format_exc()))
            else:
                results.append(CheckResult(str(check), "passed"))
    return Report(subject.name, tuple(results))


__all__ = [
    "AssertsDisabledError",
    "CheckResult",
    "Report",
    "Status",
    "all_checks",
    "applicable",
    "run_check",
    "run_conformance",
]
