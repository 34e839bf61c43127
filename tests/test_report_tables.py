"""Pure report tables: counter increases across resets, stall intervals and the bandwidth to halve them."""
from __future__ import annotations

import pandas as pd
import pytest

from analytics.report.checkpoints import checkpoint_cost, stall_intervals
from analytics.report.tables import counter_increase


def frame(rows):
    return pd.DataFrame(rows, columns=["cluster", "job_id", "timestamp", "value"])


def test_counter_increase_sums_series_and_survives_a_reset():
    rows = [("c", "1", t, v) for t, v in ((0, 10), (60, 15), (120, 3), (180, 8))]  # reset at 120: 10 → 15, 0 → 3 → 8
    rows += [("c", "2", t, v) for t, v in ((0, 0), (60, 1))]
    out = counter_increase(frame(rows), ["cluster"]).set_index("cluster")
    assert out.loc["c", "increase"] == (15 - 10) + 3 + (8 - 3) + 1


def test_stall_intervals_and_checkpoint_bandwidth():
    step = 30
    on = {300, 330, 360, 900, 930}  # two stalls: 90 s and 60 s
    stalled = frame([("c", "7", t, 1.0 if t in on else 0.0) for t in range(0, 1200, step)])
    spans = stall_intervals(stalled, step)
    assert spans[["start", "end"]].values.tolist() == [[300, 390], [900, 960]]
    # 2 GB/s during each stall, nothing otherwise
    rate = pd.DataFrame({"cluster": "c", "timestamp": range(0, 1200, step),
                         "value": [2e9 if t in on else 0.0 for t in range(0, 1200, step)]})
    cost = checkpoint_cost(stalled, rate, step, window_s=60).set_index("job_id")
    assert cost.loc["7", "checkpoints"] == 2 and cost.loc["7", "mean_blocked_s"] == 75
    assert cost.loc["7", "observed_write_gb_s"] == pytest.approx(2.0)
    assert cost.loc["7", "bandwidth_to_halve_gb_s"] == pytest.approx(4.0)


def test_a_counter_born_inside_the_range_counts_its_first_value():
    # an XID series appears at t=120 with value 1 (the exporter emits it on the first event)
    rows = [("c", "1", 0, 4), ("c", "1", 60, 4), ("c", "2", 120, 1), ("c", "2", 180, 2)]
    assert counter_increase(frame(rows), ["cluster"], start=0)["increase"].tolist() == [2.0]
    assert counter_increase(frame(rows), ["cluster"])["increase"].tolist() == [1.0]  # no range start: baselines
