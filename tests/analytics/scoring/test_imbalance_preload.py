"""The mixture's import started ahead of scoring (``imbalance.preload``): once per process, in a thread of its
own, and the scorer then finds it imported."""
from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration   # a fresh interpreter

CHECK = """
import sys
import numpy as np
from lockstep.analytics.scoring import imbalance
assert "sklearn.mixture" not in sys.modules, "imported before the preload"
first, second = imbalance.preload(), imbalance.preload()
assert first is second and first.daemon and first.name == "preload-mixture"
first.join(120)
assert not first.is_alive() and "sklearn.mixture" in sys.modules
paces = np.log(np.r_[np.ones(12), np.full(4, 1.2)] * (1 + 0.002 * np.arange(16) % 3))
assert imbalance.involved(paces).tolist() == [False] * 12 + [True] * 4
print("ok")
"""


def test_preload_imports_the_mixture_once_in_a_thread():
    # a fresh interpreter: the test session may have imported scikit-learn already
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
