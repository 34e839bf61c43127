"""The built wheel installs one import namespace, ``lockstep``, and nothing else at the top level, so it
can sit in one environment beside a distribution whose top-level package is ``analytics`` (Segment's
``analytics-python``): both import, each its own.

Builds the wheel with pip (the build backend from PyPI, as any user's install does) and installs it and
``analytics-python`` into a fresh virtual environment.
"""
from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from tests.helpers.paths import REPO

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(REPO)],
                   check=True, capture_output=True, text=True, timeout=600)
    (built,) = out.glob("lockstep_telemetry-*.whl")
    return built


def test_the_wheel_holds_only_the_lockstep_namespace_and_its_data(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"lockstep", next(t for t in tops if t.endswith(".dist-info"))}, tops
    for expected in ("lockstep/analytics/scoring/straggler.py", "lockstep/exporters/catalog/xid.csv",
                     "lockstep/simulator/scenarios/demo.yaml", "lockstep/alerts/rules.py", "lockstep/cli.py"):
        assert expected in names


def test_lockstep_and_segments_analytics_python_import_side_by_side(wheel: Path, tmp_path: Path) -> None:
    env = tmp_path / "env"
    venv.create(env, with_pip=True)
    python = str(env / "bin" / "python")

    def pip(*args: str) -> None:
        subprocess.run([python, "-m", "pip", "install", "--quiet", *args], check=True, capture_output=True,
                       text=True, timeout=600)

    pip("--no-deps", str(wheel))      # the catalog and the package tree need none of its dependencies
    pip("analytics-python==1.4.post1")
    probe = ("import analytics, lockstep.analytics, lockstep.exporters.catalog.xid as xid\n"
             "print(analytics.__file__); print(lockstep.analytics.__file__)\n"
             "print(callable(analytics.track), len(xid.CATALOG) > 0)\n")
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    segment, ours, checks = done.stdout.splitlines()
    site = str(env)
    assert segment.startswith(site) and segment.endswith("analytics/__init__.py")
    assert ours.startswith(site) and ours.endswith("lockstep/analytics/__init__.py")
    assert checks == "True True"
