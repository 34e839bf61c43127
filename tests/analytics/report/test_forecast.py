"""The forecast model (``analytics/report/forecast.py``) on synthetic series of known trend and noise:
each check is over many seeds, its expected figure from the series' own parameters."""
from __future__ import annotations

import numpy as np
import pytest

from lockstep.analytics.report import forecast as fc

DAYS, HELD = 30, 7


def series(seed: int, slope: float, sigma: float = 5.0, level: float = 100.0, days: int = DAYS) -> np.ndarray:
    return level + slope * np.arange(days) + np.random.default_rng(seed).normal(0.0, sigma, days)


@pytest.mark.slow
def test_a_held_back_week_falls_inside_the_interval_about_as_often_as_stated():
    """Fit on 23 days of a trend with Gaussian noise, forecast the held-back last week: over 300 series
    the share of held-back days inside the 90 % interval is near 90 % (the binomial spread of 2,100
    days is about 0.7 %; a plain interval without the slope's uncertainty or the residual scaling
    falls a few points short), and the mean error is near zero (no bias)."""
    checks = [fc.backtest(series(s, slope=2.0), held=HELD, floor=None, seed=s) for s in range(300)]
    coverage = np.mean([c.coverage for c in checks])
    assert 0.87 <= coverage <= 0.93, coverage
    assert abs(np.mean([c.mean_error for c in checks])) < 0.5        # noise of 5, averaged over 2,100 days
    # the typical error is the noise's own mean absolute size (5 * sqrt(2/pi) = 4.0) plus a little for the slope
    assert 4.0 <= np.mean([c.mean_abs_error for c in checks]) <= 5.0


@pytest.mark.parametrize("rate", [pytest.param(0.3, marks=pytest.mark.slow), 1.0,
                                  pytest.param(3.0, marks=pytest.mark.slow)])
def test_small_counts_are_covered_too(rate):
    """Daily failure counts are small whole numbers (Poisson, most days 0 at the lowest rate), floored
    at 0: the bootstrap assumes no shape of the noise. (A count whose rate rises has a spread that
    rises with it, which the month's residuals understate: the model's stated limit.)"""
    rng = np.random.default_rng(7)
    inside = [fc.backtest(rng.poisson(rate, DAYS), held=HELD, seed=s).coverage for s in range(300)]
    assert 0.85 <= np.mean(inside) <= 0.95


@pytest.mark.slow
def test_the_slope_of_a_known_trend_is_recovered_within_its_interval():
    hits = []
    for s in range(200):
        f = fc.fit(series(s, slope=1.5), floor=None, seed=s)
        hits.append(f.slope_lo <= 1.5 <= f.slope_hi)
        assert f.slope == pytest.approx(1.5, abs=0.5)
    assert 0.85 <= np.mean(hits) <= 0.95


def test_a_flat_series_forecasts_flat():
    """No trend: the slopes scatter about zero (their spread for noise 5 over 30 days is about 0.1 a
    day), and the interval 90 days out, widened by the slope's uncertainty, holds the level."""
    fits = [fc.fit(series(s, slope=0.0), floor=None, seed=s) for s in range(100)]
    assert abs(np.mean([f.slope for f in fits])) < 0.03
    assert np.mean([f.slope_lo < 0 < f.slope_hi for f in fits]) >= 0.85
    assert np.mean([f.lo[-1] < 100 < f.hi[-1] for f in fits]) >= 0.85
    f = fits[0]
    assert (f.hi - f.lo)[-1] > (f.hi - f.lo)[0]
    assert f.total == pytest.approx(f.mean.sum(), rel=0.01) and f.total_lo < f.total < f.total_hi


def test_runs_out_where_the_trend_meets_the_limit():
    """100 + 2 per day (with a tiny wobble) reaches 299 at day 99.5: the first whole day is 100."""
    f = fc.fit(100 + 2.0 * np.arange(DAYS) + np.tile([0.1, -0.1], DAYS // 2), floor=None)
    central, earliest = fc.runs_out(f, 299.0)
    assert central == 100 and earliest is not None and earliest <= central
    assert fc.runs_out(f, 1e6) == (None, None)
    assert fc.runs_out(fc.fit(series(1, slope=0.0)), 1000.0) == (None, None)   # flat never reaches it


def test_the_floor_keeps_a_falling_count_at_zero():
    f = fc.fit(np.linspace(5, 0, DAYS))
    assert (f.mean >= 0).all() and (f.lo >= 0).all() and f.mean[-1] == 0


def test_too_few_days_is_an_error():
    with pytest.raises(ValueError, match="at least 3 days"):
        fc.fit([1.0, 2.0])
    with pytest.raises(ValueError, match="needs 14 days"):
        fc.backtest(np.arange(10.0))
