"""A causal rolling mean over the columns of a matrix at once, value for value what pandas'
``DataFrame(x).rolling(window, min_periods=1).mean()`` gives, without its one call per column (a
65,536-GPU window spent most of its scoring time there).

It follows pandas' own running sum (``roll_mean`` in pandas/_libs/window/aggregations.pyx): values
enter and leave a Kahan-compensated sum, NaN is skipped, a run of identical values gives that value
exactly, and a mean of all non-negative (non-positive) values is never below (above) zero.
``tests/test_analytics_scoring_speed.py`` holds it to pandas on random matrices.
"""
from __future__ import annotations

import numpy as np


def rolling_mean(x: np.ndarray, window: int) -> np.ndarray:
    """times × columns: the mean of each column's finite values among its last ``window`` rows (NaN
    where there is none), in float64."""
    x = np.asarray(x, dtype=np.float64)
    rows, cols = x.shape
    out = np.empty((rows, cols))
    nobs, negative, same = (np.zeros(cols, np.int64) for _ in range(3))
    total, added, removed = np.zeros(cols), np.zeros(cols), np.zeros(cols)
    prev = x[0].copy() if rows else np.zeros(cols)
    for i in range(rows):
        if i >= window:
            total, removed = _kahan(total, removed, -x[i - window], nobs, negative, -1)
        v = x[i]
        ok = ~np.isnan(v)
        total, added = _kahan(total, added, v, nobs, negative, 1)
        same = np.where(ok, np.where(v == prev, same + 1, 1), same)
        prev = np.where(ok, v, prev)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = total / nobs
        mean = np.where(same >= nobs, prev, mean)
        mean = np.where((same < nobs) & (negative == 0) & (mean < 0), 0.0, mean)
        mean = np.where((same < nobs) & (negative == nobs) & (mean > 0), 0.0, mean)
        out[i] = np.where(nobs > 0, mean, np.nan)
    return out


def _kahan(total: np.ndarray, compensation: np.ndarray, v: np.ndarray, nobs: np.ndarray, negative: np.ndarray,
           sign: int) -> tuple[np.ndarray, np.ndarray]:
    """``v`` added to the compensated ``total`` where it is a number (``sign`` -1: the value leaving, given
    negated); the counts of values and of negative ones kept with it (in place)."""
    ok = ~np.isnan(v)
    y = v - compensation
    t = total + y
    nobs += sign * ok
    negative += sign * (ok & np.signbit(v if sign > 0 else -v))
    return np.where(ok, t, total), np.where(ok, t - total - y, compensation)
