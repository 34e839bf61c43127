"""Each rank's step times read back from Prometheus: the node agent's step-feed counters
(``lockstep_rank_steps_total``, ``lockstep_rank_step_seconds_total``, ``lockstep_rank_last_step``; catalog
``pace``) → the step-time scorer's input, one row per rank and scrape interval: ``worker`` (the rank), ``step``
and ``seconds``.

Between two consecutive scrapes of a rank, ``seconds`` is the increase of its step seconds over the increase of
its steps: the mean wall time of the steps that ended in that interval. Where the scrape interval is no longer
than a step, each row is one step's own time; where it is coarser, one row covers several steps and the scorer
sees per-interval means (its persistence and baseline then count intervals, not steps, and a first flag names
the interval's last step). ``step`` is the step number the rank gave with its last step end in the interval
(``lockstep_rank_last_step``), its step count where it gives none. An interval with no step end is no row; one
where a counter went down (the agent restarted) is none either: the next interval starts from the new count. A
process's first step end adds a step and no seconds (nothing before it to measure from), so an interval holding
a restarted process's first step end understates the mean a little.

Raw samples are read (range selectors, one instant query per counter per ``SPAN_S`` of the window), so the
rows are the scrapes themselves, not a resampled grid.
"""
from __future__ import annotations

import math

import aiohttp
import pandas as pd

from lockstep.analytics.prom import promql
from lockstep.analytics.prom.api import api_get
from lockstep.analytics.prom.errors import MalformedAnswer
from lockstep.exporters.catalog import pace

COLUMNS = ("worker", "step", "seconds")
SPAN_S = 3600.0     # the range of one query: an hour of raw samples per rank


def _series(result: list, query: str) -> dict[str, dict[float, float]]:
    """A matrix answer → {rank: {timestamp: value}}; two series of one rank (its GPU placed later, say) merge,
    the later sample at a timestamp kept."""
    out: dict[str, dict[float, float]] = {}
    try:
        for series in result:
            rank = series["metric"].get("rank", "")
            points = out.setdefault(rank, {})
            for stamp, value in series["values"]:
                points[round(float(stamp), 3)] = float(value)
    except (KeyError, TypeError, ValueError) as exc:
        raise MalformedAnswer(f"{query}: not a matrix of samples: {type(exc).__name__}: {exc}") from None
    return out


def frame(steps: dict[str, dict[float, float]], seconds: dict[str, dict[float, float]],
          last_step: dict[str, dict[float, float]] | None = None) -> pd.DataFrame:
    """Per rank, the raw samples of its two counters (and its last step number) → ``worker,step,seconds``
    rows, one per scrape interval in which steps ended (see the module's doc)."""
    rows: list[tuple[str, int, float]] = []
    last_step = last_step or {}
    for rank in sorted(set(steps) & set(seconds), key=lambda r: (len(r), r)):
        numbers = last_step.get(rank, {})
        stamps = sorted(set(steps[rank]) & set(seconds[rank]))
        for before, after in zip(stamps, stamps[1:]):
            d_steps = steps[rank][after] - steps[rank][before]
            d_seconds = seconds[rank][after] - seconds[rank][before]
            if d_steps <= 0 or d_seconds <= 0:
                continue      # no step ended, or a counter reset
            step = numbers.get(after, steps[rank][after])
            rows.append((rank, int(step), d_seconds / d_steps))
    return pd.DataFrame(rows, columns=list(COLUMNS))


async def read(session: aiohttp.ClientSession, base_url: str, job_id: str, start: float, end: float,
               timeout: float) -> pd.DataFrame:
    """The ``worker,step,seconds`` rows of ``job_id``'s ranks from ``start`` to ``end`` (Unix seconds)."""
    if not end > start:
        raise ValueError(f"the window must end after it starts ({start:g} .. {end:g})")
    names = {"steps": pace.RANK_STEPS.name, "seconds": pace.RANK_STEP_SECONDS_TOTAL.name,
             "last": pace.RANK_LAST_STEP.name}
    found: dict[str, dict[str, dict[float, float]]] = {k: {} for k in names}
    pieces = max(1, math.ceil((end - start) / SPAN_S))
    span = (end - start) / pieces
    # the first range reaches back to ``start`` itself, the later ones start just after the previous end
    reach = f"{math.ceil(span * 1000)}ms"
    for k in range(1, pieces + 1):
        at = start + k * span
        for key, name in names.items():
            query = f"{promql.with_job(name, job_id)}[{reach}]"
            result = await api_get(session, base_url, "/api/v1/query", {"query": query, "time": f"{at:.3f}"},
                                   timeout)
            for rank, points in _series(result, query).items():
                found[key].setdefault(rank, {}).update(points)
    return frame(found["steps"], found["seconds"], found["last"])
