"""Shared test configuration: this directory is on ``sys.path`` (pytest's prepend import mode
adds a conftest's directory), so cross-package helpers such as ``proc_support`` import by name."""

import pytest

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
