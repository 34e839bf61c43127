"""The allocator settings of ``lockstep analytics``: with them, temporaries of tens of MB allocated and freed one
round after another reuse the process's memory instead of having the kernel fault and zero it again each round;
without them (glibc's defaults, the baseline run the same way) they do not. Run in fresh interpreters: the
settings are process-wide."""
from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

from lockstep.analytics import malloc

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt's thresholds are glibc's")

WORKLOAD = """
import json, resource, sys
import numpy as np
from lockstep.analytics import malloc
tuned = malloc.tune() if sys.argv[1] == "tune" else None
def round_():
    arrays = [np.ones(20 << 17) for _ in range(4)]   # four temporaries of 20 MB, then all freed
    del arrays
round_()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    round_()
print(json.dumps({"tuned": tuned, "faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before}))
"""


def run(mode: str, **env: str) -> dict:
    out = subprocess.run([sys.executable, "-c", WORKLOAD, mode], capture_output=True, text=True, check=True,
                         env={"PATH": "/usr/bin:/bin", **env})
    return json.loads(out.stdout)


@pytest.mark.integration
def test_freed_temporaries_are_reused_not_faulted_in_again():
    baseline, tuned = run("default"), run("tune")
    assert tuned["tuned"] is True
    pages = 4 * (20 << 20) // 4096
    assert baseline["faults"] > pages / 10      # glibc's defaults give memory back and take it again...
    assert tuned["faults"] < pages / 100        # ...the settings keep it for the next round


def test_the_operators_own_settings_win():
    assert malloc.tune({"MALLOC_ARENA_MAX": "2"}) is False
    assert malloc.tune({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"}) is False


@pytest.mark.integration
def test_an_operators_trim_threshold_is_kept():
    result = run("tune", MALLOC_TRIM_THRESHOLD_="0")
    assert result["tuned"] is False and result["faults"] > 0
