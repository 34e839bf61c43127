"""A simulated run replayed through the analytics service's own refresh (``Refresher``), as it would
have scored it live: a window every ``every_s``, answers computed as Prometheus gives them
(``emulate``), and, where the scenario has a ``prometheus_outage``, the service cut off from
Prometheus for a while (its refreshes fail) with Prometheus itself down for the first part of it
(those samples never were), then the gap caught up window by window. What ``make eval`` checks of
it: the loss counters' goodput ledger still sums to what the service allocated.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pandas as pd

from lockstep.analytics.evaluation.emulate import Answers
from lockstep.analytics.prom.errors import PrometheusError
from lockstep.analytics.prom.grid import Window
from lockstep.analytics.scoring.ledger import SETTLE_S
from lockstep.analytics.service.config import Shard
from lockstep.analytics.service.refresh import Refresher
from lockstep.analytics.service.state import LossCounters


@dataclass(frozen=True)
class Outage:
    start: float          # unix seconds: the service gets no answer from here...
    end: float            # ...to here
    lost_until: float     # samples before this (from ``start``) are not in Prometheus at all


class ReplaySource:
    """The inputs' answers over a run's frame; raises while the outage holds at ``now``."""

    def __init__(self, frame: pd.DataFrame, job_id: str, outage: Outage | None) -> None:
        if outage is not None:
            frame = frame[~frame["timestamp"].between(outage.start, outage.lost_until, inclusive="neither")]
        self.answers = Answers(frame)
        self.job_id, self.outage, self.now, self.ended = job_id, outage, 0.0, False

    def _reachable(self) -> None:
        if self.outage is not None and self.outage.start <= self.now < self.outage.end:
            raise PrometheusError("connection refused (the scenario's prometheus_outage)")

    async def list_jobs(self, at: float, lookback_s: float = 0.0) -> list[str]:
        self._reachable()
        return [] if self.ended else [self.job_id]

    async def series(self, inp, job_id: str, window: Window, nodes: tuple[str, ...]):
        self._reachable()
        return self.answers.block(inp, window, job_id, nodes)

    async def resume(self, job_ids: list[str], at: float) -> dict[str, LossCounters]:
        return {}


@dataclass(frozen=True)
class ReplaySettings:
    window_s: float = 300.0
    step_s: float = 5.0
    shard: Shard = Shard(0, 1)
    refetch_steps: int = 1
    settle_s: float = SETTLE_S


def replay(frame: pd.DataFrame, job_id: str, start: float, duration_s: float, step_s: float,
           outage: Outage | None = None, every_s: float = 60.0) -> LossCounters:
    """The job's loss counters after refreshing every ``every_s`` from the first full window to the end, and
    once more with the job no longer listed (it ended: its newest samples are booked)."""
    source = ReplaySource(frame, job_id, outage)
    refresher = Refresher(source, ReplaySettings(step_s=step_s))

    async def run() -> LossCounters:
        t = start + refresher.settings.window_s
        while t <= start + duration_s:
            source.now = t
            try:
                await refresher.refresh(t)
            except PrometheusError as exc:
                refresher.failed(exc)
            t += every_s
        counters = refresher.state.losses.get(job_id, LossCounters())
        source.ended = True      # the job ended: one more refresh books its newest samples
        await refresher.refresh(t)
        return counters
    return asyncio.run(run())
