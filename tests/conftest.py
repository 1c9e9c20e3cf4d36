"""Shared test configuration: this directory is on ``sys.path`` (pytest's prepend import mode
adds a conftest's directory), so cross-package helpers such as ``proc_support`` import by name."""

import functools
import os

import pytest

from tether.sandbox._backends import BwrapBackend

# The conformance kit is plain asserts in the package; rewrite them for readable failures
# (before any test module imports it).
pytest.register_assert_rewrite("tether.testing")


@pytest.fixture(autouse=True)
def isolated_user_dirs(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every test gets its own home, config and data directories (inherited by the ``tether``
    processes it starts): trust records, the default store and chat history never touch the
    real user's, and nothing one test trusts is trusted in another."""
    user = tmp_path_factory.mktemp("user")
    for name, sub in (("HOME", "home"), ("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data")):
        (user / sub).mkdir()
        monkeypatch.setenv(name, str(user / sub))


# -- tests that need bubblewrap -----------------------------------------------------------------
@functools.cache
def bwrap_unusable() -> str | None:
    """Why bubblewrap cannot confine commands here (the sandbox's own probe), else ``None``."""
    probe = BwrapBackend().probe()
    return None if probe.ok else probe.reason


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked ``bwrap`` skips, with the reason, on a machine without a working
    bubblewrap, so the README's test command passes on a fresh machine; with ``CI`` set it
    fails instead (``.ci/run`` sets it), so CI never passes without having proved the sandbox."""
    if item.get_closest_marker("bwrap") is None or (reason := bwrap_unusable()) is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but bubblewrap is unusable: {reason}", pytrace=False)
    pytest.skip(f"needs bubblewrap: {reason} (install it, e.g. apt-get install bubblewrap)")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    # Read from the reports, not probed here: under pytest-xdist the tests (and the probe) ran
    # in worker processes, and this hook runs in the controller.
    skipped = [str(report.longrepr) for report in terminalreporter.stats.get("skipped", [])]
    if any("needs bubblewrap:" in text for text in skipped) and not os.environ.get("CI"):
        terminalreporter.write_line(
            "bubblewrap is unusable: the tests that need it were skipped (each with the "
            "reason); install it to run them (with CI set they fail instead)",
            yellow=True,
        )
