"""Where the tests' data lies: the repository, the tests folder, its fixtures and golden files."""
from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
REPO = TESTS.parent
FIXTURES = TESTS / "fixtures"
GOLDEN = TESTS / "golden"
