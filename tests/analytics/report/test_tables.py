"""Pure report tables: counter increases across resets, stall intervals and the bandwidth to halve them."""
from __future__ import annotations

import pandas as pd
import pytest

from lockstep.analytics.report.checkpoints import checkpoint_cost, stall_intervals
from lockstep.analytics.report.tables import counter_increase


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


def test_a_drop_within_the_backends_precision_is_no_restart():
    # VictoriaMetrics answers floats to 12 significant digits: a counter standing at v can read back as v and,
    # from another storage block, as v less its last digit. That is the same value, not a restart from zero
    # (which would count v a second time); a real drop, however near the value, still is one.
    v = 24.174662219776
    rows = [("c", "1", t, x) for t, x in ((60, 0.0), (120, v), (180, v - 1e-11), (240, v), (300, v))]
    assert counter_increase(frame(rows), ["cluster"], start=0)["increase"].tolist() == [pytest.approx(v, rel=1e-12)]
    rows = [("c", "1", t, x) for t, x in ((60, 0.0), (120, v), (180, v * 0.999), (240, v * 0.999))]
    assert counter_increase(frame(rows), ["cluster"], start=0)["increase"].tolist() == [pytest.approx(v + v * 0.999)]


def test_a_point_that_is_not_a_number_is_no_sample_of_the_counter():
    # a counter born inside the range reaches 24 and stays; one point in between answered NaN (a backend's
    # stale or missing sample): the point after it is an increase of 0 since 24, not a counter born again
    nan = float("nan")
    rows = [("c", "1", t, v) for t, v in ((60, 5), (120, 24), (180, nan), (240, 24), (300, 24))]
    assert counter_increase(frame(rows), ["cluster"], start=0)["increase"].tolist() == [24.0]
    # only a series' first sample can be born: a later one follows the sample before it (here a reset)
    rows = [("c", "1", t, v) for t, v in ((60, 5), (120, 24), (180, 3))]
    assert counter_increase(frame(rows), ["cluster"], start=0)["increase"].tolist() == [24.0 + 3.0]


def test_pdu_energy_is_a_lifetime_counter_not_born_in_the_range(tmp_path):
    # The PDU was unreachable at the month's first evaluation point: its series shows up an hour in
    # with its lifetime total (5 TJ). Only what it counted inside the range (3.6 MJ = 1 kWh) is this month's.
    from lockstep.analytics.report.monthly import ReportConfig, build_sections
    from lockstep.analytics.report.queries import Steps, monthly_queries

    start = 1_790_812_800.0  # 2026-10-01T00:00Z
    frames = {q.name: pd.DataFrame(columns=["cluster", "timestamp", "value"]) for q in monthly_queries(Steps())}
    frames["energy"] = pd.DataFrame({"cluster": "c", "rack": "r1", "pdu": "p1",
                                     "timestamp": [start + 3600, start + 7200], "value": [5e12, 5e12 + 3.6e6]})
    sections = {s.csv_name: s.table for s in
                build_sections(frames, ReportConfig("http://x", "2026-10", tmp_path), start, start + 86400)}
    assert sections["rack_energy.csv"].set_index("rack").loc["r1", "energy_kwh"] == pytest.approx(1.0)
    assert sections["rack_energy_daily.csv"]["r1"].sum() == pytest.approx(1.0)


def _sections(tmp_path, start, **frames):
    from lockstep.analytics.report.monthly import ReportConfig, build_sections
    from lockstep.analytics.report.queries import Steps, monthly_queries

    all_frames = {q.name: pd.DataFrame(columns=["cluster", "timestamp", "value"]) for q in monthly_queries(Steps())}
    all_frames.update(frames)
    return {s.csv_name: s.table for s in
            build_sections(all_frames, ReportConfig("http://x", "2026-10", tmp_path), start, start + 86400)}


def test_window_queries_at_the_first_point_look_at_the_previous_month(tmp_path):
    # avg_over_time(...[3600s:]) and max_over_time(...[3600s:30s]) evaluated at the month's first second
    # describe the hour *before* it: September's last hour (throttled all of it, 90 kW) is not October's.
    start = 1_790_812_800.0  # 2026-10-01T00:00Z
    throttle = pd.DataFrame({"cluster": "c", "node": "node01", "gpu": "3",
                             "timestamp": [start, start + 3600, start + 7200], "value": [1.0, 0.5, 0.0]})
    peak = pd.DataFrame({"cluster": "c", "rack": "r1", "timestamp": [start, start + 3600], "value": [90e3, 40e3]})
    out = _sections(tmp_path, start, throttle=throttle, rack_peak=peak)
    faults = out["recurring_faults.csv"]
    assert faults["events"].tolist() == [pytest.approx(0.5)]              # hours throttled in October
    assert out["rack_energy.csv"].set_index("rack").loc["r1", "peak_w"] == 40e3


def test_an_event_in_the_last_hour_counts_on_the_last_day_of_the_month(tmp_path):
    # The point at the range's end (00:00 of the next day) closes the interval (23:00, 24:00] of the
    # range's last day: its XID happened on that day, not on the next one.
    start = 1_790_812_800.0  # the range is 2026-10-01 (one UTC day)
    end = start + 86400
    xid = pd.DataFrame({"cluster": "c", "node": "node01", "gpu": "3", "xid": "79",
                        "timestamp": [start, start + 3600, end - 3600, end], "value": [2.0, 3.0, 3.0, 4.0]})
    out = _sections(tmp_path, start, xid=xid)
    assert out["recurring_faults.csv"][["events", "days_with_events"]].values.tolist() == [[2.0, 1]]
