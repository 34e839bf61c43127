"""Plain modules the tests share: constants, fakes and helper functions. No tests and no fixtures live
here (fixtures live in the ``conftest.py`` of the folder whose tests share them); a test module never
imports another test module, only these."""
