"""lockstep's tests (tests/README.md says what lives where)."""
import pytest

# A failed assert in a shared helper says what it compared, as in a test module.
pytest.register_assert_rewrite("tests.helpers")
