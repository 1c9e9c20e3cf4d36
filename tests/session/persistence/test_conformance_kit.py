"""The conformance kit itself: it runs without pytest, fails a backend that breaks a rule,
skips what a backend does not claim, and holds a backend to what it does claim."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conformance_support import JsonlBackend

from tether.session._header import SessionHeader
from tether.session.persistence import JsonlPersistence, Persistence
from tether.testing import (
    REQUIRED,
    BackendUnderTest,
    Capability,
    CheckResult,
    Report,
    all_checks,
    raises,
    run_conformance,
)

NO_PYTEST = """
import importlib.abc, sys

class NoPytest(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pytest", "_pytest", "pytest_asyncio"):
            raise ImportError(f"{name} is refused in this process")
        return None

sys.meta_path.insert(0, NoPytest())
"""

RUN_WITHOUT_PYTEST = (
    NO_PYTEST
    + """
import asyncio, json
try:
    import pytest
except ImportError:
    pass
else:
    raise SystemExit("pytest was importable")
import tether.testing
sys.path.insert(0, sys.argv[1])
from conformance_support import JsonlBackend
report = asyncio.run(tether.testing.run_conformance(JsonlBackend()))
print(json.dumps({
    "ok": report.ok,
    "counts": [len(report.of(s)) for s in ("passed", "failed", "skipped")],
    "pytest_loaded": sorted(m for m in sys.modules if "pytest" in m),
}))
"""
)


def test_the_kit_imports_and_runs_where_pytest_cannot_be_imported() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", NO_PYTEST + "import tether.testing"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    run = subprocess.run(
        [sys.executable, "-c", RUN_WITHOUT_PYTEST, str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {
        "ok": True,
        "counts": [len(all_checks()), 0, 0],
        "pytest_loaded": [],
    }


def test_the_kit_refuses_to_run_when_asserts_are_stripped() -> None:
    program = (
        "import asyncio, sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from conformance_support import JsonlBackend\n"
        "from tether.testing import AssertsDisabledError, run_conformance\n"
        "try:\n"
        "    asyncio.run(run_conformance(JsonlBackend()))\n"
        "except AssertsDisabledError as err:\n"
        "    print(err.code, err)\n"
    )
    run = subprocess.run(
        [sys.executable, "-O", "-c", program, str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (run.returncode, run.stderr) == (0, "")
    assert run.stdout == (
        "ASSERTS_DISABLED python -O strips the asserts the conformance checks are made of; "
        "run without -O\n"
    )


class NewestFirst(JsonlPersistence):
    """The JSONL backend with one rule broken: ``list`` returns the newest header first."""

    async def list(self) -> list[SessionHeader]:
        return (await super().list())[::-1]


class NewestFirstBackend(BackendUnderTest):
    def open(self, root: Path) -> Persistence:
        return NewestFirst(root / "sessions")


async def test_a_backend_that_breaks_a_rule_fails_the_checks_of_that_rule() -> None:
    report = await run_conformance(
        NewestFirstBackend(), only=(Capability.LIST, Capability.LOAD, Capability.APPEND)
    )
    assert not report.ok
    assert [r.check for r in report.of("failed")] == [
        "load/session_ids_are_opaque_strings",
        "list/list_returns_every_header_oldest_first",
    ]
    assert {r.check.split("/")[0] for r in report.results} == {"list", "load", "append"}
    failure = report.of("failed")[1].detail
    assert "AssertionError" in failure
    assert "assert await persistence.list() == sorted(made" in failure
    assert "FAILED list/list_returns_every_header_oldest_first" in report.format()


class BareJsonl(BackendUnderTest):
    """A backend that claims nothing beyond the six operations."""

    def open(self, root: Path) -> Persistence:
        return JsonlPersistence(root / "sessions")


async def test_what_a_backend_does_not_claim_is_skipped_and_named() -> None:
    report = await run_conformance(BareJsonl())
    assert report.ok
    required_only = [c for c in all_checks() if c.needs <= REQUIRED]
    assert [r.check for r in report.of("passed")] == [str(c) for c in required_only]
    skipped = {r.check: r.detail for r in report.of("skipped")}
    assert len(skipped) == len(all_checks()) - len(required_only)
    assert skipped["reopen/racing_writers_exactly_one_wins"] == "not claimed: reopen"
    assert skipped["close/close_is_idempotent"] == "not claimed: reopen"
    assert skipped["storage_snapshot/inspect_leaves_stored_bytes_unchanged"] == (
        "not claimed: corrupt_tail, storage_snapshot"
    )


class ClaimsTooMuch(BareJsonl):
    capabilities = frozenset({Capability.CORRUPT_TAIL, Capability.REOPEN})


async def test_a_claim_without_its_hook_fails_instead_of_skipping() -> None:
    report = await run_conformance(ClaimsTooMuch(), only=(Capability.CORRUPT_TAIL,))
    assert [r.status for r in report.results] == ["failed"] * 4
    for result in report.results:
        assert (
            "AssertionError: ClaimsTooMuch claims corrupt_tail but does not implement "
            "corrupt_tail()"
        ) in result.detail


class AsyncJsonl(JsonlBackend):
    """Every method of the backend under test may be a coroutine."""

    capabilities = frozenset({Capability.CORRUPT_TAIL, Capability.REOPEN})

    async def open(self, root: Path) -> Persistence:  # type: ignore[override]
        return super().open(root)

    async def corrupt_tail(self, persistence: Persistence, session_id: str) -> None:  # type: ignore[override]
        super().corrupt_tail(persistence, session_id)


async def test_async_open_and_hooks_are_awaited() -> None:
    report = await run_conformance(AsyncJsonl(), only=(Capability.CORRUPT_TAIL, Capability.CREATE))
    assert report.ok
    assert len(report.of("passed")) == len(report.results) == 7


class OpensSomethingElse(BackendUnderTest):
    def open(self, root: Path) -> Persistence:
        return str(root)  # type: ignore[return-value]


async def test_open_must_return_a_persistence() -> None:
    report = await run_conformance(OpensSomethingElse(), only=(Capability.CLOSE, Capability.LIST))
    assert [r.status for r in report.results] == ["failed", "skipped"]
    assert "OpensSomethingElse.open() returned str, not a Persistence" in report.results[0].detail


def test_raises_catches_the_expected_error_and_fails_without_one() -> None:
    with raises(KeyError) as caught:
        raise KeyError("k")
    assert isinstance(caught.error, KeyError)
    with (
        pytest.raises(AssertionError, match="expected KeyError, nothing was raised"),
        raises(KeyError),
    ):
        pass
    with pytest.raises(ValueError), raises(KeyError):
        raise ValueError("another kind propagates")
    with pytest.raises(AssertionError, match="nothing was caught yet"), raises(KeyError) as pending:
        _ = pending.error


def test_report_format() -> None:
    report = Report(
        "Mine",
        (
            CheckResult("create/a", "passed"),
            CheckResult("reopen/b", "skipped", "not claimed: reopen"),
            CheckResult("list/c", "failed", "Traceback ...\nAssertionError\n"),
        ),
    )
    assert report.format() == (
        "PASSED  create/a\n"
        "SKIPPED reopen/b\n"
        "FAILED  list/c\n"
        "skipped reopen/b: not claimed: reopen\n"
        "\n"
        "FAILED list/c\n"
        "Traceback ...\n"
        "AssertionError\n"
        "Mine: 1 passed, 1 failed, 1 skipped"
    )
    assert not report.ok
    assert Report("Mine", report.results[:2]).ok
