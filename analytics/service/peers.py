"""The fleet pass of ``lockstep analytics serve``: every GPU against its model-and-driver peers.

It runs in the analytics service because the service already reads the fleet's telemetry from
Prometheus on a schedule, holds state between refreshes (the verdicts' persistence) and serves
``/metrics`` that the alert rules read; the node agent sees one node and cannot know the peers, and a
recording rule cannot take a median over a group's spread in robust units. One instant query per
feature (``lockstep.analytics.frame.peers``), reduced in the TSDB to one value per GPU; the scoring is
``lockstep.analytics.scoring.peers``. Only shard 0 runs it: the answer is one for the whole fleet.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import pandas as pd

from lockstep.analytics.frame import peers as inputs
from lockstep.analytics.scoring import peers
from lockstep.exporters.catalog import fleet as cat
from lockstep.exporters.toolkit.sample import Sample

log = logging.getLogger("lockstep.analytics")


class InstantSource(Protocol):
    async def instant(self, query: str, at: float) -> list[dict]:
        """``data.result`` of an instant query at ``at`` (raises ``PrometheusError``)."""


@dataclass(frozen=True)
class PeerRow:
    node: str
    gpu: str
    model: str
    score: float
    evidence: dict[str, float]
    degraded: bool


@dataclass(frozen=True)
class PeerResults:
    rows: tuple[PeerRow, ...] = ()
    updated: float | None = None


def _value(r: dict) -> float:
    try:
        return float(r["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return float("nan")


def frame_from(info: list[dict], features: dict[str, list[dict]]) -> pd.DataFrame:
    """One row per GPU on ``lockstep_gpu_info`` (index ``node, gpu``): its model, driver and features (NaN
    where a query had no answer for it). Pure: the answers' ``result`` lists in, the frame out."""
    meta = {}
    for r in info:
        m = r.get("metric", {})
        if m.get("node") and m.get("gpu") is not None:
            meta[(m["node"], m["gpu"])] = (m.get("name", ""), m.get("driver_version", ""))
    index = pd.MultiIndex.from_tuples(sorted(meta), names=["node", "gpu"])
    frame = pd.DataFrame({"model": [meta[k][0] for k in index], "driver": [meta[k][1] for k in index]}, index=index)
    for name in peers.INPUTS:
        values = {(r["metric"].get("node"), r["metric"].get("gpu")): _value(r) for r in features.get(name, [])
                  if isinstance(r.get("metric"), dict)}
        frame[name] = [values.get(k, np.nan) for k in index]
    return frame


EVERY_S = 300.0   # the fleet pass runs at most this often (the evaluation's refresh): its windows are 15 minutes


@dataclass
class PeerRefresher:
    source: InstantSource
    verdicts: peers.Verdicts = field(default_factory=peers.Verdicts)
    results: PeerResults = field(default_factory=PeerResults)
    every_s: float = EVERY_S
    tried: float | None = None   # when the last pass began, answered or not
    recorded: bool = True        # read the recorded inputs where the store's rules record them over the window
    read_recorded: bool | None = None   # whether the last pass did

    async def refresh(self, at: float) -> PeerResults:
        """The fleet scored at ``at``; the last results while the previous pass began less than ``every_s`` ago,
        also when it failed: its queries cover the whole fleet, and a store that could not answer them in time
        (a 65,536-GPU fleet) is not asked again at every refresh, beside the jobs' own queries."""
        last = self.tried if self.tried is not None else self.results.updated
        if last is not None and at - last < self.every_s:
            return self.results
        self.tried = at
        covered = self.recorded and inputs.recorded_covers(await self.source.instant(inputs.recorded_coverage_query(),
                                                                                     at))
        if covered != self.read_recorded:
            log.info("fleet pass reads %s", "the recorded inputs" if covered else
                     "the raw series (no recorded inputs over the window)")
        self.read_recorded = covered
        queries = inputs.recorded_queries() if covered else inputs.queries()
        answers = await asyncio.gather(self.source.instant(inputs.info_query(), at),
                                       *(self.source.instant(q, at) for q in queries.values()))
        frame = frame_from(answers[0], dict(zip(queries, answers[1:])))
        self.results = await asyncio.to_thread(self._score, frame, at)
        return self.results

    def _score(self, frame: pd.DataFrame, at: float) -> PeerResults:
        dev = peers.deviations(frame)
        score = peers.scores(dev)
        degraded = self.verdicts.update(score, at)
        found = peers.evidence(dev)
        rows = tuple(PeerRow(node, gpu, frame.at[(node, gpu), "model"], float(score[(node, gpu)]),
                             found.get((node, gpu), {}), (node, gpu) in degraded)
                     for node, gpu in frame.index if np.isfinite(score[(node, gpu)]) or (node, gpu) in degraded)
        return PeerResults(rows, at)


def samples(results: PeerResults) -> list[Sample]:
    out = []
    for r in results.rows:
        labels = (r.node, r.gpu, r.model)
        if np.isfinite(r.score):
            out.append(Sample(cat.PEER_OUTLIER_SCORE, labels, round(r.score, 3)))
        out.append(Sample(cat.PEER_DEGRADED, labels, float(r.degraded)))
        for feature, z in r.evidence.items():
            out.append(Sample(cat.PEER_DEVIATION, labels + (feature,), z))
    return out
