"""A rank's usual pace (``relative.learn_baseline``) against the rule it implements, written out rank by rank and
sample by sample: its first ``MIN_SEED`` active samples taken as they come, then those within ``floor`` of its median
so far, until it holds ``samples``; NaN until it holds ``ready``; a prior baseline kept as it is. The implementation
batches ranks and sorts or partitions them together; the rule here takes ``np.median`` of each rank's own list."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lockstep.analytics.scoring import relative


def by_the_rule(level, active, samples, floor, ready, prior=None):
    t_n, r_n = level.shape
    out = np.full((t_n, r_n), np.nan)
    for r in range(r_n):
        if prior is not None and np.isfinite(prior[r]):
            out[:, r] = prior[r]
            continue
        accepted: list[float] = []
        median = np.nan
        for t in range(t_n):
            v = level[t, r]
            near = len(accepted) < relative.MIN_SEED or abs(v - median) < floor
            if len(accepted) < samples and active[t] and np.isfinite(v) and near:
                accepted.append(float(v))
                median = float(np.median(accepted))
            out[t, r] = median if len(accepted) >= ready else np.nan
    return out


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 40), st.integers(1, 12), st.integers(1, 12), st.integers(1, 4), st.floats(0.01, 0.5),
       st.integers(0, 2**32 - 1), st.booleans())
def test_the_baseline_is_each_ranks_median_of_what_it_accepted(t_n, r_n, samples, ready, floor, seed, with_prior):
    samples = max(samples, ready)    # as the scorers call it: a baseline holds at least what makes it ready
    rng = np.random.default_rng(seed)
    level = rng.normal(0, 0.1, (t_n, r_n))
    level[rng.random((t_n, r_n)) < 0.15] = np.nan                  # missed scrapes
    level[t_n // 2:, : r_n // 2] += rng.choice([0.0, 0.4])         # a slowdown that starts midway
    active = rng.random(t_n) > 0.2                                  # stalls of other causes
    prior = np.where(rng.random(r_n) < 0.4, rng.normal(0, 0.1, r_n), np.nan) if with_prior else None
    got = relative.learn_baseline(level, active, samples, floor, ready, prior)
    assert np.allclose(got, by_the_rule(level, active, samples, floor, ready, prior), equal_nan=True, rtol=0, atol=1e-12)


def test_ranks_that_accept_every_sample_and_ranks_that_do_not_agree_with_the_rule():
    """The partition path (every rank holds as many) and the sort path (some rank skipped a sample) side by side."""
    level = np.array([[0.0, 0.0], [0.1, np.nan], [0.2, 0.2], [0.3, 0.3], [0.4, 0.4]])
    active = np.ones(5, bool)
    got = relative.learn_baseline(level, active, 4, 1.0, 1)
    assert np.array_equal(got, by_the_rule(level, active, 4, 1.0, 1), equal_nan=True)
    # rank 0 holds its four samples at t=3 and keeps their median; rank 1 missed t=1 and takes t=4 as its fourth
    assert got[3].tolist() == [np.median([0.0, 0.1, 0.2, 0.3]), np.median([0.0, 0.2, 0.3])]
    assert got[4].tolist() == [np.median([0.0, 0.1, 0.2, 0.3]), np.median([0.0, 0.2, 0.3, 0.4])]
