"""Plain modules the tests share: constants, fakes and helper functions. No tests and no fixtures live
here (fixtures live in the ``conftest.py`` of the folder whose tests share them); a test module never
imports another test module, only these."""
import pytest

# A failed assert in a helper says what it compared, as it did when the helper sat in a test module.
pytest.register_assert_rewrite(__name__)
