"""A daily series' trend and its forecast with uncertainty: a straight line and a residual bootstrap.

The model is a line through the days (scikit-learn's ``LinearRegression`` on the day number), and its
uncertainty a residual bootstrap: the line refitted to itself plus resampled residuals, each refit
carried forward and given a resampled residual of its own, so an interval holds both how far the
slope may be off (growing with the horizon) and how far one day scatters about the line.

Why no more than that: one month holds about 30 daily points, from which a weekly cycle, a curve or a
change point cannot be told from noise, while the slope is what a capacity question asks. The
bootstrap assumes nothing of the noise's shape (failure counts are small whole numbers, skewed), and
all its refits are one multi-output least-squares fit. Residuals are scaled by sqrt(n / (n - 2)):
a fitted line's residuals are smaller than the noise by the two parameters it spent.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.linear_model import LinearRegression

HORIZON_DAYS = 90
LEVEL = 0.9              # the intervals' nominal coverage
RESAMPLES = 1000
MIN_DAYS = 7             # fewer points give a slope that says nothing


@dataclass(frozen=True)
class Forecast:
    """``days`` are the future day numbers (on the input's scale); per day, the line (``mean``) and
    the interval of that day's value; ``total*``: the horizon's expected sum (over the floored
    draws: a line below the floor still has days above it) and its interval."""

    slope: float
    slope_lo: float
    slope_hi: float
    last_day: float
    days: np.ndarray
    mean: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    total: float
    total_lo: float
    total_hi: float


def fit(values, days=None, horizon: int = HORIZON_DAYS, level: float = LEVEL, floor: float | None = 0.0,
        seed: int = 0, resamples: int = RESAMPLES) -> Forecast:
    """Forecast ``horizon`` days past the last of ``days`` (default 0, 1, …); ``floor`` bounds
    quantities that cannot go below it (GPU-hours, events, watts)."""
    y = np.asarray(values, dtype=float)
    x = np.arange(len(y), dtype=float) if days is None else np.asarray(days, dtype=float)
    if len(y) < 3 or len(x) != len(y):
        raise ValueError(f"a trend needs at least 3 days, one value each (got {len(y)} values, {len(x)} days)")
    line = LinearRegression().fit(x[:, None], y)
    fitted = line.predict(x[:, None])
    resid = (y - fitted) * np.sqrt(len(y) / (len(y) - 2))
    rng = np.random.default_rng(seed)
    boot = LinearRegression().fit(x[:, None], fitted[:, None] + rng.choice(resid, size=(len(y), resamples)))
    future = x.max() + np.arange(1, horizon + 1, dtype=float)
    trend = boot.intercept_[None, :] + future[:, None] * boot.coef_[:, 0][None, :]     # (horizon, resamples)
    draws = trend + rng.choice(resid, size=trend.shape)
    lower = -np.inf if floor is None else floor
    draws = np.maximum(draws, lower)
    q = ((1 - level) / 2, (1 + level) / 2)
    lo, hi = np.quantile(draws, q, axis=1)
    slope_lo, slope_hi = np.quantile(boot.coef_[:, 0], q)
    sums = draws.sum(axis=0)       # the floor applies per day: the expected total is their mean, not the line's sum
    totals = np.quantile(sums, q)
    mean = np.maximum(line.predict(future[:, None]), lower)
    return Forecast(float(line.coef_[0]), float(slope_lo), float(slope_hi), float(x.max()), future, mean, lo, hi,
                    float(sums.mean()), float(totals[0]), float(totals[1]))


def runs_out(forecast: Forecast, limit: float) -> tuple[float | None, float | None]:
    """The first future day the line reaches ``limit``, and the first its interval's top does (the
    earliest it may); None where not within the horizon."""
    def first(values: np.ndarray) -> float | None:
        hit = np.flatnonzero(values >= limit)
        return float(forecast.days[hit[0]]) if hit.size else None
    return first(forecast.mean), first(forecast.hi)


@dataclass(frozen=True)
class Backtest:
    """The forecast from all but the last ``held`` days against those days."""

    held: int
    mean_abs_error: float
    mean_error: float           # forecast minus actual: above zero, the forecast ran high
    coverage: float             # share of held days inside the interval
    level: float


def backtest(values, days=None, held: int = 7, level: float = LEVEL, floor: float | None = 0.0,
             seed: int = 0) -> Backtest:
    y = np.asarray(values, dtype=float)
    x = np.arange(len(y), dtype=float) if days is None else np.asarray(days, dtype=float)
    if len(y) - held < MIN_DAYS:
        raise ValueError(f"a backtest holding {held} days back needs {MIN_DAYS + held} days (got {len(y)})")
    f = fit(y[:-held], x[:-held], horizon=int(x[-1] - x[-held - 1]), level=level, floor=floor, seed=seed)
    at = np.searchsorted(f.days, x[-held:])
    error = f.mean[at] - y[-held:]
    inside = (f.lo[at] <= y[-held:]) & (y[-held:] <= f.hi[at])
    return Backtest(held, float(np.abs(error).mean()), float(error.mean()), float(inside.mean()), level)
