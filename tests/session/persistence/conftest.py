import pytest

# The conformance suite lives in the package; rewrite its asserts for readable failures.
pytest.register_assert_rewrite("tether.session.persistence.conformance")
