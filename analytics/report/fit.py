"""The report fitted to the data the probe found (``lockstep.analytics.report.coverage``): its steps, where its
queries start, which counters started inside the range, and the sentence that says what it covers."""
from __future__ import annotations

from datetime import datetime, timezone

import pandas as pd

from lockstep.analytics.report.coverage import EDGE_S, NICE_STEPS, Coverage
from lockstep.analytics.report.queries import Steps

MIN_POINTS = 100          # coarse points over the covered span, at least


def adapt(steps: Steps, coverage: Coverage) -> Steps:
    """Steps for the covered span: at most the ones asked for, at least MIN_POINTS coarse points
    over the span where the data allows, and never finer than the data's sample interval."""
    data = coverage.resolution_s
    fits = [s for s in NICE_STEPS if s <= coverage.span_s / MIN_POINTS]
    coarse = min(steps.coarse_s, max(float(fits[-1]) if fits else data, data))
    return Steps(coarse, min(coarse, max(steps.fine_s, data)))


def query_start(start: float, coverage: Coverage | None, steps: Steps) -> float:
    """The first evaluation point: the month's first second, or the coarse step before the first data
    (on the month's grid), so that nothing is asked of the empty part of the month."""
    if coverage is None or coverage.first - EDGE_S <= start + steps.coarse_s:
        return start
    return start + (coverage.first - EDGE_S - start) // steps.coarse_s * steps.coarse_s


def born_after(start: float, coverage: Coverage | None, steps: Steps, frames: dict[str, pd.DataFrame]) -> float:
    """A counter first seen after this time started counting inside the range (its first value counts
    in full); one seen before it was already running. Where monitoring began inside the month, every
    target's counters show up within a step and a scrape of the first point with any data."""
    if coverage is None or coverage.first - EDGE_S <= start + steps.coarse_s:
        return start
    seen = [float(f["timestamp"].min()) for f in frames.values() if not f.empty]
    return (min(seen) if seen else coverage.first) + steps.coarse_s + coverage.resolution_s


def summary(coverage: Coverage | None, start: float, end: float, month_end: float, steps: Steps) -> dict:
    """One row for coverage.csv and the report's first lines."""
    month_days = (month_end - start) / 86400.0
    days = min(coverage.span_s, end - start) / 86400.0 if coverage else 0.0
    return {"first_data": _utc(coverage.first) if coverage else "", "last_data": _utc(coverage.last) if coverage else "",
            "days_with_data": round(days, 3), "days_in_month": month_days, "month_covered_pct": 100.0 * days / month_days,
            "month_to_date": end < month_end, "sample_interval_s": coverage.resolution_s if coverage else None,
            "step_s": steps.coarse_s, "fine_step_s": steps.fine_s}


def describe(row: dict) -> str:
    if not row["first_data"]:
        return "No data found in this month."
    to_date = " (month to date)" if row["month_to_date"] else ""
    return (f"Data from {row['first_data']} to {row['last_data']}: {row['days_with_data']:.2f} of the month's "
            f"{row['days_in_month']:.0f} days ({row['month_covered_pct']:.1f} %){to_date}. Sampled every "
            f"{row['sample_interval_s']:g} s; totals at {row['step_s']:g} s steps, checkpoint stalls and peaks at "
            f"{row['fine_step_s']:g} s.")


def _utc(seconds: float) -> str:
    return f"{datetime.fromtimestamp(seconds, timezone.utc):%Y-%m-%d %H:%M} UTC"
