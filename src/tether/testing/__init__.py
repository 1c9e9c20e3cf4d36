"""The persistence conformance kit: checks any session store backend against the contract.

It needs nothing but tether: the checks are plain async functions with plain asserts, so a
backend can run them from a script, from CI, or from any test framework. Describe the backend
once::

    import asyncio
    from pathlib import Path

    from tether.testing import BackendUnderTest, Capability, run_conformance

    class MyBackend(BackendUnderTest):
        capabilities = frozenset({Capability.REOPEN})

        def open(self, root: Path) -> MyPersistence:
            return MyPersistence(root / "store")

    report = asyncio.run(run_conformance(MyBackend()))
    print(report.format())
    raise SystemExit(0 if report.ok else 1)

The checks are asserts, so they refuse to run under ``python -O``, which strips asserts
(``ASSERTS_DISABLED``).

``open`` may be called more than once in a check with the same ``root``: every call must
return a new, independent handle onto the same storage. A backend has the six operations of
:class:`~tether.session.persistence._base.Persistence`; everything else is a
:class:`Capability` it claims in ``capabilities``, and a check that needs an unclaimed one is
skipped (the report names the claim). The damage capabilities (``corrupt_tail``,
``corrupt_record``, ``set_format_version``, ``storage_snapshot``) each need the method of the
same name on the subclass, because only the backend knows how to damage its own storage; each
may be sync or async.

To run the checks as tests of your own framework, take :func:`applicable` (the checks your
backend's claims cover) and call :func:`run_check` for each with an empty directory; it
raises when the check fails. tether's own adapter, for pytest, is
``tests/session/persistence/test_conformance.py``. Under pytest, call
``pytest.register_assert_rewrite("tether.testing")`` before anything imports this package
for detailed assertion messages.

The contract: ``create`` refuses a taken id; ``append`` is all-or-nothing and its first event
continues the stored length, else :class:`~tether.session.persistence._base.SeqConflictError`
(also for a batch with a gap and for a racing writer); ``load`` returns exactly what was
appended, drops a torn tail, refuses damage before the tail, refuses unknown required event
types and other format versions, and closes an interrupted turn durably (see
:mod:`tether.session.persistence._repair`); ``inspect`` returns the same view and writes
nothing; ``list`` returns every header, oldest first, without reading events; ``close`` is
idempotent. A backend that defers syncs (``defers_sync``) commits under every one of these rules and
loses nothing by ``sync`` or ``close``. Each rule is a check in the spec of the operation or
capability it is about (:mod:`tether.testing.spec`, one module each).
"""

from tether.testing._capabilities import OPTIONAL, REQUIRED, Capability
from tether.testing._checks import Check, Spec, Trial, raises
from tether.testing._fixtures import (
    T0,
    UNKNOWN_TYPE,
    closed_turn,
    dicts,
    expected_closers,
    header,
    interrupted_turn,
    make_events,
    titles,
)
from tether.testing._runner import (
    AssertsDisabledError,
    CheckResult,
    Report,
    Status,
    all_checks,
    applicable,
    run_check,
    run_conformance,
)
from tether.testing._subject import BackendUnderTest

__all__ = [
    "OPTIONAL",
    "REQUIRED",
    "T0",
    "UNKNOWN_TYPE",
    "AssertsDisabledError",
    "BackendUnderTest",
    "Capability",
    "Check",
    "CheckResult",
    "Report",
    "Spec",
    "Status",
    "Trial",
    "all_checks",
    "applicable",
    "closed_turn",
    "dicts",
    "expected_closers",
    "header",
    "interrupted_turn",
    "make_events",
    "raises",
    "run_check",
    "run_conformance",
    "titles",
]
