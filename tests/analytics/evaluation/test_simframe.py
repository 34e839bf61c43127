"""``lockstep.analytics.evaluation.simframe``: a simulator frame turned into features, absent metrics as NaN."""
from __future__ import annotations

import numpy as np
import pandas as pd

from lockstep.analytics.evaluation.simframe import build_features
from lockstep.analytics.scoring import stall


def test_absent_metric_is_nan_not_zero():
    rows = []
    for t in (0.0, 5.0):
        rows.append({"timestamp": t, "metric": "lockstep_gpu_job_info", "node": "node00", "gpu": "0",
                     "job_id": "1", "value": 1.0})
        rows.append({"timestamp": t, "metric": "lockstep_gpu_sm_active_ratio", "node": "node00", "gpu": "0",
                     "job_id": "", "value": 0.5})
    f = build_features(pd.DataFrame(rows))
    assert np.isnan(f.signals["tensor"]).all() and np.isnan(f.signals["tx"]).all()
    assert f.signals["sm"].tolist() == [[0.5], [0.5]]
    assert stall.job_signals(f, "1").progress.tolist() == [0.5, 0.5]   # SM activity stands in
