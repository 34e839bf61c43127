"""The scorers' vectorized helpers give exactly what the code they replace gave: the rolling mean
what pandas' gives (``lockstep.analytics.scoring.rolling``), the per-node reductions what a loop over
the nodes gives (``lockstep.analytics.scoring.bynode``), the throttling reasons' votes what their rule
computed with the habit as a share, value for value, NaN for NaN."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lockstep.analytics.scoring.bynode import nanmedian, node_columns, per_node
from lockstep.analytics.scoring.nanstats import nan_reduce
from lockstep.analytics.scoring.rolling import rolling_mean
from lockstep.analytics.scoring.straggler import REASON_PREFIX, reason_votes
from tests.helpers.paths import REPO


def _matrix(rng, kind: int, rows: int, cols: int) -> np.ndarray:
    x = rng.normal(0.5, 0.3, (rows, cols))
    x = [x, np.round(x, 1), -np.abs(x), np.abs(x) * 1e10, rng.choice([0.1, 0.2, 0.3, -0.1], (rows, cols))][kind]
    x[rng.random((rows, cols)) < 0.2] = np.nan
    x[:, :1] = np.nan                        # a column that never holds a value
    return x


@pytest.mark.parametrize("seed", range(6))
def test_the_rolling_mean_is_pandas_value_for_value(seed):
    rng = np.random.default_rng(seed)
    for trial in range(40):
        x = _matrix(rng, trial % 5, int(rng.integers(1, 80)), int(rng.integers(1, 30)))
        x = x.astype(np.float32) if trial % 2 else x     # the frame's matrices are float32
        window = int(rng.integers(1, 12))
        want = pd.DataFrame(x).rolling(window, min_periods=1).mean().to_numpy()
        np.testing.assert_array_equal(rolling_mean(x, window), want)


@pytest.mark.parametrize("seed", range(4))
def test_per_node_reductions_are_the_loop_over_nodes(seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 9, 30)
    nodes = np.repeat([f"node{i:02d}" for i in range(len(sizes))], sizes)
    order = rng.permutation(len(nodes))     # columns need not be grouped
    nodes = nodes[order]
    x = _matrix(rng, seed % 5, 50, len(nodes))
    x[rng.random(x.shape) < 0.3] = np.nan
    x[:, nodes == "node03"] = np.nan       # a node without any value
    names, groups = node_columns(nodes)
    assert names == list(pd.unique(nodes))
    medians = per_node(x, groups, nanmedian)
    means = per_node(x > 0.5, groups, np.mean)
    for k, node in enumerate(names):
        np.testing.assert_array_equal(medians[:, k], nan_reduce(np.nanmedian, x[:, nodes == node], axis=1))
        np.testing.assert_array_equal(means[:, k], (x > 0.5)[:, nodes == node].mean(axis=1))


def test_a_large_jobs_drifts_side_by_side_are_the_ones_computed_in_turn(monkeypatch):

    from lockstep.analytics.evaluation.evaluate import simulate
    from lockstep.analytics.evaluation.simframe import build_features
    from lockstep.analytics.scoring import straggler
    from lockstep.analytics.scoring.score import score_features

    run = simulate(REPO / "simulator/scenarios/slow-node.yaml")
    features = build_features(run.frame)
    in_turn = score_features(features, run.start, run.period)
    monkeypatch.setattr(straggler, "PARALLEL_GPUS", 1)
    side_by_side = score_features(features, run.start, run.period)
    for job, res in in_turn.items():
        other = side_by_side[job]
        for name, d in res.stragglers.drifts.items():
            np.testing.assert_array_equal(d.excess, other.stragglers.drifts[name].excess)
        np.testing.assert_array_equal(res.stragglers.flagged, other.stragglers.flagged)
        assert res.detections == other.detections and res.loss == other.loss


def _reason_votes_as_shares(sig, active, calm, samples, ready):
    """The reasons' rule as first written: the habit a share of the calm samples seen, a reason most of the job
    holds never a vote."""
    out = {}
    taken = active[:, None] & calm
    count = np.cumsum(taken, axis=0)
    first = taken & (count <= samples)
    seen = np.minimum(count, samples)
    for name, held in sig.items():
        if name.startswith(REASON_PREFIX):
            now = np.nan_to_num(held) > 0
            with np.errstate(divide="ignore", invalid="ignore"):
                habit = np.cumsum(now & first, axis=0) / seen
            common = now.mean(axis=1, keepdims=True) > 0.5
            out[name[len(REASON_PREFIX):]] = now & (seen >= ready) & (habit < 0.5) & ~common
    return out


@pytest.mark.parametrize("seed", range(4))
def test_the_reasons_votes_are_their_rule_value_for_value(seed):
    rng = np.random.default_rng(seed)
    for _ in range(40):
        rows, cols = int(rng.integers(1, 90)), int(rng.integers(1, 12))
        held = {f"{REASON_PREFIX}r{k}": np.where(rng.random((rows, cols)) < [0.02, 0.3, 0.7, 0.0][k], 1.0,
                                                  rng.choice([0.0, np.nan, np.inf, -1.0], (rows, cols)))
                for k in range(4)}
        sig = {**held, "clock": rng.random((rows, cols))}        # not a reason: no vote
        active, calm = rng.random(rows) < 0.9, rng.random((rows, cols)) < 0.8
        samples, ready = int(rng.integers(1, 30)), int(rng.integers(1, 6))
        want = _reason_votes_as_shares(sig, active, calm, samples, ready)
        got = reason_votes(sig, active, calm, samples, ready)
        assert got.keys() == want.keys() == {f"r{k}" for k in range(4)}
        for name in want:
            np.testing.assert_array_equal(got[name], want[name])
