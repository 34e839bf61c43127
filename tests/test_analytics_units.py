"""Pure pieces of analytics on hand-built inputs whose answers are known by construction."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import warnings

import numpy as np
import pandas as pd
import pytest

from lockstep.analytics.evaluation.emulate import irate
from lockstep.analytics.evaluation.simframe import build_features
from lockstep.analytics.frame.features import SIGNALS, Features
from lockstep.analytics.prom import promql
from lockstep.analytics.scoring import stall, straggler
from lockstep.analytics.service.config import Shard, parse_shard

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


def run(f: Features) -> straggler.StragglerResult:
    js = stall.job_signals(f, "j")
    causes, _ = stall.classify(js)
    return straggler.score(f, "j", js, causes, PERIOD)


def test_half_the_peers_slow_from_the_start_is_imbalance_not_stragglers():
    """Two of four GPUs on every node slow from the first sample: nothing *became* slower."""
    t, n = 40, 16
    slow = np.zeros(n, bool)
    slow[[0, 1, 4, 5, 8, 9, 12, 13]] = True
    busy = np.where(slow, 0.8, 0.6) + np.zeros((t, n))
    clock = np.where(slow, 0.75, 1.0) + np.zeros((t, n))
    res = run(features(busy, clock, np.zeros((t, n)), nodes=4))
    assert not res.flagged.any() and res.node_flagged == {}


def test_robust_reference_holds_when_a_quarter_of_the_peers_slow_down_later():
    """One GPU on every node, from sample 10 (the job's common drift is its median GPU's: a
    straggler is a minority of its job; half of it slowing together is a job-wide change)."""
    t, n = 40, 16
    slow = np.zeros(n, bool)
    slow[[0, 5, 10, 15]] = True
    busy, clock = np.full((t, n), 0.6), np.ones((t, n))
    busy[10:, slow], clock[10:, slow] = 0.8, 0.75
    res = run(features(busy, clock, np.zeros((t, n)), nodes=4))
    assert set(np.flatnonzero(res.flagged[-1])) == set(np.flatnonzero(slow))
    assert res.node_flagged == {}


def test_fast_minority_and_two_groups_flag_only_the_gpu_that_slows():
    """Three GPUs 15% faster and a third of the job 2.5x slower, all from the start; GPU 9 (of the
    fast majority) slows down 25% with its clock from sample 12."""
    t, n = 40, 16
    speed = np.ones(n)
    speed[[1, 2, 3]] = 1 / 1.15
    speed[10:] = 2.5
    busy = 0.3 * speed + np.zeros((t, n))
    clock = np.ones((t, n))
    busy[12:, 9] *= 1.25
    clock[12:, 9] = 0.8
    res = run(features(busy, clock, np.zeros((t, n)), nodes=2))
    assert set(np.flatnonzero(res.flagged.any(axis=0))) == {9}


def test_a_faster_gpu_is_never_a_straggler():
    """GPU 4 speeds up (its peers look relatively slower): nobody is flagged."""
    t, n = 40, 16
    busy, clock = np.full((t, n), 0.6), np.ones((t, n))
    busy[10:, 4], clock[10:, 4] = 0.45, 1.0
    res = run(features(busy, clock, np.zeros((t, n)), nodes=2))
    assert not res.flagged.any() and res.node_flagged == {}


def test_thermal_slowdown_counts_while_most_of_the_job_is_power_capped():
    """sw_power_cap held by 14 of 16 GPUs all along; GPU 6 takes on hw_thermal_slowdown and runs
    slow from sample 10 with an unchanged clock: the reason is its second signal."""
    t, n = 40, 16
    f = features(np.full((t, n), 0.6), np.ones((t, n)), np.ones((t, n)), nodes=2)
    f.signals["sm"][10:, 6] = f.signals["tensor"][10:, 6] / 0.7 * 1.2
    f.signals["tensor"][10:, 6] *= 1.2
    cap = np.ones((t, n))
    cap[:, [3, 11]] = 0.0
    thermal = np.zeros((t, n))
    thermal[10:, 6] = 1.0
    f.signals.update({"reason:sw_power_cap": cap, "reason:hw_thermal_slowdown": thermal})
    res = run(f)
    assert set(np.flatnonzero(res.flagged.any(axis=0))) == {6}
    assert res.reasons["hw_thermal_slowdown"][10:, 6].all() and not res.reasons["sw_power_cap"].any()


def test_a_short_blip_is_not_flagged_a_persistent_one_is():
    t, n = 40, 16
    busy, clock = np.full((t, n), 0.6), np.ones((t, n))
    busy[5:7, 3], clock[5:7, 3] = 0.9, 0.7             # 10 s: below the persistence
    busy[20:, 7], clock[20:, 7] = 0.9, 0.7             # from sample 20 on
    res = run(features(busy, clock, np.zeros((t, n)), nodes=2))
    assert not res.flagged[:, 3].any()
    first = int(np.argmax(res.flagged[:, 7]))
    assert (first - 20 + 1) * PERIOD == straggler.PERSIST_S
    assert res.holding[20:, 7].all()                  # the loss account covers the whole slowdown


def test_node_wide_slowdown_is_reported_for_the_node():
    t, n = 30, 32
    busy = np.full((t, n), 0.6)
    busy[10:, 8:16] = 0.75                            # every GPU of node01, clocks untouched
    res = run(features(busy, np.ones((t, n)), np.zeros((t, n)), nodes=4))
    assert list(res.node_flagged) == ["node01"] and res.node_flagged["node01"][-1]
    assert not res.flagged.any()


def test_single_signal_alone_does_not_flag():
    t, n = 30, 16
    clock = np.ones((t, n))
    clock[:, 2] = 0.8                                 # a low clock, but the GPU keeps pace
    res = run(features(np.full((t, n), 0.6), clock, np.zeros((t, n)), nodes=2))
    assert not res.flagged.any()


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


@pytest.mark.parametrize("fn, args", [(np.nanmedian, ()), (np.nanmean, ()), (np.nanmax, ()),
                                      (np.nanquantile, (0.9,))])
@pytest.mark.parametrize("axis", [0, 1, None])
def test_nan_reduce_is_numpys_reduction_with_nan_for_a_slice_without_values(fn, args, axis):
    """What numpy gives, bit for bit and in the matrix's own dtype, NaN where a slice has no value, and
    no warning raised (here warnings are errors) or left in the filters."""
    m = np.array([[1.0, np.nan, 3.0, 0.1], [np.nan] * 4, [2.0, 5.0, np.nan, 7.0]], dtype=np.float32)
    filters = list(warnings.filters)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = stall.nan_reduce(fn, m, *args, axis=axis)
    assert warnings.filters == filters
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = fn(m, *args, axis=axis)
    assert np.asarray(got).dtype == np.float32 and np.array_equal(got, want, equal_nan=True)
    assert np.isnan(stall.nan_reduce(fn, np.full((2, 3), np.nan), *args, axis=axis)).all()


def test_scoring_threads_leave_the_process_warning_filters_as_they_were():
    """The scorers run in worker threads (``asyncio.to_thread``). Before: ``nan_reduce`` silenced numpy's
    "All-NaN slice" warning with ``warnings.catch_warnings``, which is not thread-safe; threads at once
    leaked the warning and left an "ignore RuntimeWarning" filter behind for the whole process."""
    m = np.full((50, 64), np.nan)
    m[:25] = 1.0
    filters = list(warnings.filters)

    def work():
        for _ in range(300):
            stall.nan_reduce(np.nanmedian, m, axis=1)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert warnings.filters == filters


@pytest.mark.parametrize("bad", ['4242"}', "a b", "", "x" * 129, "-1", "4242\n", 'a\\"', "{job}"])
def test_crafted_job_ids_are_rejected(bad):
    with pytest.raises(promql.InvalidJobId):
        promql.job_selector(bad)


@pytest.mark.parametrize("good", ["4242", "4242_7", "4242+0", "train.llama-70b:v2"])
def test_scheduler_job_ids_are_accepted(good):
    assert promql.job_selector(good) == f'lockstep_gpu_job_info{{job="lockstep-node",job_id="{good}"}}'


def test_quote_escapes_everything_that_could_end_the_string():
    assert promql.quote('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'


def test_shards_split_jobs_stably_and_completely():
    jobs = [str(i) for i in range(1000, 1200)]
    owners = [[j for j in jobs if Shard(i, 3).owns(j)] for i in range(3)]
    assert sorted(sum(owners, [])) == sorted(jobs) and all(30 < len(o) < 110 for o in owners)
    # the same split in another interpreter (Python's own str hash is salted per process)
    code = "from lockstep.analytics.service.config import Shard; print([str(j) for j in range(1000, 1200) if Shard(1, 3).owns(str(j))])"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={**os.environ, "PYTHONHASHSEED": "random"}, check=True).stdout
    assert other.strip() == str(owners[1])
    assert parse_shard("1/3") == Shard(1, 3)
    for bad in ("3/3", "1", "a/b", "-1/2"):
        with pytest.raises(ValueError):
            parse_shard(bad)


@pytest.mark.parametrize("field", ["interval_s", "window_s", "step_s", "timeout_s"])
def test_service_durations_must_be_finite(field):
    from lockstep.analytics.service.config import ServiceConfig

    with pytest.raises(ValueError, match=field):
        ServiceConfig(prometheus_url="http://127.0.0.1:9090", **{field: float("inf")})


def test_a_window_shorter_than_the_interval_is_refused():
    """Refreshes 60 s apart scoring 30 s each would leave half of every job unscored and uncounted."""
    from lockstep.analytics.service.config import ServiceConfig

    with pytest.raises(ValueError, match=r"--window \(30.0s\) must be at least --interval \(60.0s\)"):
        ServiceConfig(prometheus_url="http://127.0.0.1:9090", interval_s=60.0, window_s=30.0)
    assert ServiceConfig(prometheus_url="http://127.0.0.1:9090", interval_s=60.0, window_s=60.0).window_s == 60.0


@pytest.mark.parametrize("bad", [0, 181])
def test_refetch_steps_must_be_at_least_one_and_within_the_window(bad):
    from lockstep.analytics.service.config import ServiceConfig

    with pytest.raises(ValueError, match="--refetch-steps"):
        ServiceConfig(prometheus_url="http://127.0.0.1:9090", refetch_steps=bad)
    assert ServiceConfig(prometheus_url="http://127.0.0.1:9090", refetch_steps=180).refetch_steps == 180


@pytest.mark.parametrize("bad", [-1.0, float("inf"), float("nan")])
def test_resume_lookback_must_be_zero_or_a_positive_finite_time(bad):
    from lockstep.analytics.service.config import ServiceConfig

    with pytest.raises(ValueError, match="--resume-lookback"):
        ServiceConfig(prometheus_url="http://127.0.0.1:9090", resume_lookback_s=bad)
    assert ServiceConfig(prometheus_url="http://127.0.0.1:9090", resume_lookback_s=0.0).resume_lookback_s == 0.0


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
