"""``lockstep.analytics.evaluation.emulate``: counter rates as Prometheus' ``irate`` computes them."""
from __future__ import annotations

import numpy as np

from lockstep.analytics.evaluation.emulate import irate


def test_counter_rates_follow_prometheus_irate_over_two_steps():
    """As Prometheus 2.42 answers ``irate(c[10s])`` at 5 s steps (checked on promtool-backfilled samples):
    the last two samples at or before each step; a missed scrape leaves the rate across the gap, a
    counter that went down restarted from zero, and two steps after the last sample there is none."""
    nan = float("nan")
    counter = np.array([[0.0, 0.0], [10.0, 10.0], [20.0, nan], [5.0, 30.0], [15.0, 40.0], [25.0, nan], [35.0, nan]])
    rate = irate(counter, 5.0)
    assert np.isnan(rate[0]).all()
    assert rate[1:, 0].tolist() == [2.0, 2.0, 1.0, 2.0, 2.0, 2.0]          # 5 / 5 s after the restart
    assert rate[1:6, 1].tolist() == [2.0, 2.0, 2.0, 2.0, 2.0] and np.isnan(rate[6, 1])
