"""Where in the month the data lies and how often it was sampled: the report's range and steps follow.

A month-to-date report, a cluster monitored from the 20th on, or a demo holding twenty minutes of
data shows next to nothing at hourly points. A cheap probe finds the data first: one count at hourly
points over the month (a point sees the 5 minutes before it, and reads one chunk per series an hour,
not every sample); every sample over 5-minute windows only if no hour point saw any (a run shorter
than an hour, whose series Prometheus marked stale at its end); the first and last minute with data
within an hour of the first and last hit; and the interval between one series' raw samples there.
The report then queries from the first data on, at steps that give the covered span enough points
and are never finer than the data (``lockstep.analytics.report.fit``).

Every grid is made of multiples of its step, as VictoriaMetrics snaps a range query of 50 points or
more to them, plus the range's own end (a month to date ends now, mid-step).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lockstep.analytics.prom.promql import quote
from lockstep.analytics.report.client import PromClient
from lockstep.analytics.report.promrange import RangeQuery, fetch, instant
from lockstep.analytics.report.queries import LOOKBACK_S, present
from lockstep.exporters.catalog import gpu as G
from lockstep.exporters.catalog import power as P

# Series whose presence says the cluster was monitored: GPUs held by jobs, and rack power.
PRESENCE_METRICS = (G.JOB_INFO.name, P.PDU_POWER.name)
PRESENCE = f'{{__name__=~"{"|".join(PRESENCE_METRICS)}"}}'
EDGE_S = 60.0             # the first and last data are found to the minute
NICE_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)


@dataclass(frozen=True, slots=True)
class Coverage:
    first: float            # the first minute mark with data in the minute before it
    last: float             # the last one
    resolution_s: float     # the coarsest sample interval found at either end, one of NICE_STEPS

    @property
    def span_s(self) -> float:
        return self.last - self.first + self.resolution_s


def _hits(client: PromClient, promql: str, lo: float, hi: float, step: float, timeout: float) -> np.ndarray:
    """The points with an answer: the multiples of ``step`` in [lo, hi], and ``hi``."""
    first, last = math.ceil(lo / step) * step, math.floor(hi / step) * step
    spans = ([(first, last)] if first <= last else []) + ([(hi, hi)] if hi > last else [])
    frames = [fetch(client, RangeQuery("coverage", promql, step), a, b, timeout) for a, b in spans]
    times = [f["timestamp"].to_numpy(dtype=float) for f in frames if not f.empty]
    return np.unique(np.concatenate(times)) if times else np.array([])


def _resolution(client: PromClient, at: float, window: float, timeout: float) -> float | None:
    """The median interval between the raw samples of one presence series in (at - window, at]."""
    for name in PRESENCE_METRICS:
        picked = instant(client, f"topk(1, {present(name, window)})", at, timeout)
        if picked:
            labels = ",".join(f"{k}={quote(v)}" for k, v in sorted(picked[0]["metric"].items()) if k != "__name__")
            raw = instant(client, f"{name}{{{labels}}}[{int(window)}s]", at, timeout)
            times = np.array([float(t) for series in raw for t, _ in series.get("values", [])])
            if len(times) >= 2:
                return float(np.median(np.diff(np.sort(times))))
    return None


def probe(client: PromClient, start: float, end: float, timeout: float = 60.0) -> Coverage | None:
    """The data's extent in [start, end] and its sample interval; None when there is none."""
    hits = _hits(client, f"count({PRESENCE})", start, end, 3600.0, timeout)
    if not len(hits):   # a short run: every sample of the month is read, but there are few
        hits = _hits(client, f"count({present(PRESENCE, LOOKBACK_S)})", start, end, LOOKBACK_S, timeout)
    if not len(hits):
        return None
    edge = f"count({present(PRESENCE, EDGE_S)})"
    first = _hits(client, edge, max(start, hits[0] - 3600.0), hits[0], EDGE_S, timeout)
    last = _hits(client, edge, max(start, hits[-1] - LOOKBACK_S), min(end, hits[-1] + 3600.0), EDGE_S, timeout)
    first = float(first[0]) if len(first) else float(hits[0])
    last = float(last[-1]) if len(last) else float(hits[-1])
    window = max(EDGE_S, min(3600.0, last - first))
    found = [r for r in (_resolution(client, at, window, timeout) for at in {min(last, first + window), last}) if r]
    return Coverage(first, last, _nice(max(found)) if found else EDGE_S)


def _nice(seconds: float) -> float:
    """The step of NICE_STEPS nearest to ``seconds`` (by ratio): a scrape interval is one of them, and
    a count of samples over a window is off by one at its edges."""
    return float(min(NICE_STEPS, key=lambda s: abs(np.log(s / max(seconds, 1e-3)))))
