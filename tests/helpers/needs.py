"""What a test needs from the machine it runs on.

A tool ``make tools`` installs is required: a test calls it through ``lockstep.stack.require_binary``,
whose error names the Debian package. What only the platform can give (a capability, a kernel feature,
a mounted sysfs) may be missing where a developer runs the tests: there the test skips, saying why,
and under ``CI`` (set by the CI runner and by .ci/run) it fails instead, since CI must run every test."""
from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def platform_lacks(reason: str) -> NoReturn:
    """Skip the test for ``reason``; under CI, fail it."""
    if in_ci():
        pytest.fail(f"{reason} (CI={os.environ['CI']}: this machine must run every test)", pytrace=False)
    pytest.skip(reason)
