"""``lockstep.analytics.service.views``: a job's findings as the view the API serves and the metrics render."""
from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.features import PERIOD, features


def test_imbalance_since_the_start_reaches_the_view_and_the_metrics():
    """Four GPUs of node01 1.25x busier than the rest from the first sample (a heavier stage): a job
    finding with their ratio to the median, 3/4 of the GPUs waiting 1 - 1/1.25 of every step, served
    in the job view and as metrics; no straggler."""
    from lockstep.analytics.scoring.score import score_features
    from lockstep.analytics.service.metrics import job_samples
    from lockstep.analytics.service.state import LossCounters
    from lockstep.analytics.service.views import job_view

    t, n = 40, 16
    busy = np.full((t, n), 0.6)
    busy[:, 8:12] = 0.75
    res = score_features(features(busy, np.ones((t, n)), np.zeros((t, n)), nodes=2), 0.0, PERIOD)["j"]
    assert not res.stragglers.flagged.any()
    found = res.imbalance
    assert [(r["node"], r["gpu"]) for r in found["ranks"]] == [("node01", g) for g in "0123"]
    assert all(r["ratio"] == pytest.approx(1.25, rel=1e-3) for r in found["ranks"])
    assert found["basis"] == found["cost_basis"] == "compute_activity"     # no step times exported here
    assert found["lost_share"] == pytest.approx(0.75 * 0.2, rel=1e-3)
    counters = LossCounters()
    counters.add(res, PERIOD)
    want = 0.75 * 0.2 * n * PERIOD * (t - 1)     # every sample but the first, which closes an earlier interval
    assert counters.imbalance == pytest.approx(want, rel=1e-3)
    view = job_view(res, counters)
    assert [(r.node, r.gpu, r.ratio) for r in view.imbalance.ranks] == [("node01", g, 1.25) for g in "0123"]
    samples = {(s.metric.name, s.labels): s.value for s in job_samples(view, counters)}
    assert samples[("lockstep_job_imbalance_lost_gpu_seconds_total", ("j",))] == pytest.approx(want, rel=1e-3)
    assert samples[("lockstep_job_imbalance_ratio", ("j", "node01", "2"))] == 1.25
