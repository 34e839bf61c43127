"""The straggler scorer (``lockstep.analytics.scoring.straggler``) on hand-built features whose answers are
known by construction: who became slower than its peers, against a reference that holds when part of the
job is slow from the start or slows down together."""
from __future__ import annotations

import numpy as np

from lockstep.analytics.frame.features import Features
from lockstep.analytics.scoring import stall, straggler
from tests.helpers.features import PERIOD, features


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
