"""Every input ``make fuzz`` found crashing a parser, replayed through its target: it must now be
handled (the parser's own error type or a result). Kept under tests/fuzz_regressions/<target>/."""
from __future__ import annotations

from fuzz.targets import TARGETS
from tests.helpers.paths import TESTS

CASES = sorted(p for p in (TESTS / "fuzz_regressions").glob("*/*") if p.is_file() and p.name != "README.md")


def test_every_kept_crash_is_handled():
    for case in CASES:  # none kept yet is a pass: there is nothing to replay
        TARGETS[case.parent.name](case.read_bytes())


def test_every_target_takes_garbage():
    for target in TARGETS.values():
        target(b"\xff\x00" + b"[" * 5000 + "²".encode() + b"9" * 5000)
