"""Hand-built features of one job (``lockstep.analytics.frame.features.Features``) whose answers are
known by construction, for the scorers' tests."""
from __future__ import annotations

import numpy as np
import pandas as pd

from lockstep.analytics.frame.features import SIGNALS, Features

PERIOD = 5.0


def features(busy: np.ndarray, clock: np.ndarray, throttle: np.ndarray, nodes: int) -> Features:
    """One job of ``busy.shape[1]`` GPUs spread evenly over ``nodes`` nodes; I/O and fabric idle."""
    t, n = busy.shape
    per = n // nodes
    cols = pd.MultiIndex.from_tuples([("j", f"node{g // per:02d}", str(g % per)) for g in range(n)],
                                     names=("job_id", "node", "gpu"))
    sig = {s: np.zeros((t, n)) for s in SIGNALS}
    sig.update(sm=busy, tensor=busy * 0.7, clock=clock, throttle=throttle, tx=np.full((t, n), 1e10),
               read=np.full((t, n), 1e9), member=np.ones((t, n)))
    return Features(np.arange(t) * PERIOD, cols, sig)
