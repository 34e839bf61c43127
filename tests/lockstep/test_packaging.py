"""Packaging and help text: what ``pip install`` and ``--help`` show a user."""
from __future__ import annotations

import subprocess
import sys
import tomllib

import pytest

from tests.helpers.paths import REPO


def test_license_is_an_spdx_expression():
    """A ``{text = ...}`` table is deprecated (setuptools warns on every install, and stops building
    such projects from 2027-02); PEP 639 wants an SPDX string, which needs setuptools >= 77."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == "Apache-2.0"
    assert "setuptools>=77" in pyproject["build-system"]["requires"]


@pytest.mark.integration
def test_a_switch_shows_no_default_in_help():
    """``--no-background ... (default: True)`` read as "on by default", the opposite of the truth."""
    for command in ("power-exporter", "exporter"):
        out = subprocess.run([sys.executable, "-m", "lockstep", command, "--help"], capture_output=True,
                             text=True, check=True).stdout
        assert "(default: True)" not in out and "(default: False)" not in out, command
        assert "(default: " in out, command  # defaults are still shown where there is one
