"""A rank's pace among its peers against its own history (pure, over times × ranks matrices).

Shared by the step-time scorer and the telemetry scorer. ``slowness`` is any per-rank measure that
grows when the rank is slower (step seconds, compute activity while the peers wait, 1 / clock). Per
sample:

- ``level``: log slowness minus the job's median at that sample (0 is the median rank), so what the
  whole job does together (warm-up, a longer sequence, a slower phase) cancels out;
- ``baseline``: the rank's level over its first ``samples`` samples, as known at each sample
  (causal), leaving out samples that already stand ``floor`` off it, so a fault that starts
  while the baseline is learned is not learned as the rank's normal;
- ``excess``: level minus baseline, minus the median of that over the job (the peers' common
  drift): how much slower than its peers the rank has become, relative to its own history. A
  fast minority, a slow majority and two groups all have an excess of 0 while nothing changes;
- ``spread``: the job's normal spread of the excess, 1.4826 × its median absolute value (the
  MAD of a centred quantity), learned from the job itself.

Imbalance is the other half: the baseline itself, a difference the rank has had since it started.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lockstep.analytics.scoring.nanstats import nan_reduce

MIN_SEED = 3          # first samples taken as they come: the reference the later ones are checked against
MAD_SCALE = 1.4826    # MAD → standard deviation for normal noise


@dataclass(frozen=True)
class Drift:
    level: np.ndarray      # times × ranks, log slowness relative to the job median
    baseline: np.ndarray   # times × ranks, the rank's usual level as known at each sample
    learned: np.ndarray    # ranks, the baseline at the last sample (what a later window starts from)
    excess: np.ndarray     # times × ranks, NaN where not scored
    spread: float          # the job's robust scale of ``excess``


def log_level(slowness: np.ndarray, floor: float = 1e-6) -> np.ndarray:
    """log slowness minus its median over the ranks of each sample; NaN stays NaN."""
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log(np.maximum(slowness, floor))
    logs = np.where(np.isfinite(slowness), logs, np.nan)
    return logs - nan_reduce(np.nanmedian, logs, axis=1)[:, None]


def learn_baseline(level: np.ndarray, active: np.ndarray, samples: int, floor: float, ready: int,
                   prior: np.ndarray | None = None) -> np.ndarray:
    """times × ranks: the median of each rank's accepted levels up to each sample, NaN until it
    holds ``ready`` of them (nothing is judged against a baseline of two noisy samples).

    A rank accepts its first ``MIN_SEED`` active samples, then those within ``floor`` of its
    baseline so far, until it holds ``samples``; ``prior`` (per rank, NaN where unknown) is a
    baseline learned earlier, kept as it is."""
    t_n, r_n = level.shape
    out = np.full((t_n, r_n), np.nan)
    held = np.full((r_n, samples), np.nan)   # each rank's accepted levels in a row of its own, contiguous
    count = np.zeros(r_n, dtype=np.int64)
    median = np.full(r_n, np.nan)
    if prior is not None:
        known = np.isfinite(prior)
        median[known], count[known] = prior[known], samples
    for t in range(t_n):
        if (count >= samples).all():
            out[t:] = np.where(count >= ready, median, np.nan)
            break
        row = level[t]
        take = active[t] & np.isfinite(row) & (count < samples)
        with np.errstate(invalid="ignore"):
            take &= (count < MIN_SEED) | (np.abs(row - median) < floor)
        idx = np.flatnonzero(take)
        if len(idx):
            held[idx, count[idx]] = row[idx]
            count[idx] += 1
            median[idx] = _filled_median(held, idx, count[idx])
        out[t] = np.where(count >= ready, median, np.nan)
    return out


def _filled_median(held: np.ndarray, idx: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Median of the first ``count`` values of each row ``idx`` of ``held`` (the rest NaN): what nanmedian
    gives, without its per-call cost in a loop over samples. Each row's values are contiguous; where every row
    holds as many (ranks that took every sample so far, the usual case), its two middle values are found by a
    partition rather than a sort."""
    k = int(count.max())
    if k == count.min():
        middle = np.partition(held[idx, :k], [(k - 1) // 2, k // 2], axis=1)
        return (middle[:, (k - 1) // 2] + middle[:, k // 2]) / 2.0
    ordered = np.sort(held[idx, :k], axis=1)
    rows = np.arange(len(idx))
    return (ordered[rows, (count - 1) // 2] + ordered[rows, count // 2]) / 2.0


def robust_scale(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(MAD_SCALE * np.median(np.abs(finite))) if len(finite) else 0.0


def drift(slowness: np.ndarray, active: np.ndarray, samples: int, floor: float, ready: int,
          prior: np.ndarray | None = None) -> Drift:
    """The ``Drift`` of a times × ranks slowness matrix; ``active`` marks the samples that count."""
    level = log_level(slowness)
    baseline = learn_baseline(level, active, samples, floor, ready, prior)
    shifted = np.where(active[:, None] if active.ndim == 1 else active, level - baseline, np.nan)
    common = nan_reduce(np.nanmedian, shifted, axis=1)
    excess = shifted - common[:, None]
    learned = baseline[-1] if len(baseline) else np.full(level.shape[1], np.nan)
    return Drift(level, baseline, learned, excess, robust_scale(excess))


def bar(spread: float, k: float, floor: float) -> float:
    """The excess that is clearly more than the job's normal spread: ``k`` spreads, at least ``floor``."""
    return max(k * spread, floor)
