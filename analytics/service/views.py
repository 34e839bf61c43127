"""What the service says about a job: typed views of a scored window, and their JSON.

``job_view`` turns the latest sample of a ``JobResult`` and the job's loss counters into a ``JobView``;
``to_json`` gives ``/api/v1/jobs/{job_id}`` its ``data``, ``JobSummary`` the rows of ``/api/v1/jobs``
(and reads them back for clients such as the demo). Field order is the JSON's key order.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from lockstep.analytics.scoring.bynode import node_columns, per_node
from lockstep.analytics.scoring.detections import gpu_evidence, node_evidence
from lockstep.analytics.scoring.evidence import plain
from lockstep.analytics.scoring.score import JobResult
from lockstep.analytics.scoring.straggler import performance
from lockstep.analytics.service.state import LossCounters


@dataclass(frozen=True)
class ScoreView:
    """A GPU's straggler score, or a node's (``gpu`` None: the median of its GPUs); while flagged, the
    evidence at the latest sample (the signals that agreed, each against its reference)."""
    node: str
    gpu: str | None
    score: float
    flagged: bool
    evidence: dict | None = None


@dataclass(frozen=True)
class RankRatio:
    """A GPU off its job's median pace since it started: its usual pace as a ratio to the median."""
    node: str
    gpu: str
    ratio: float


@dataclass(frozen=True)
class ImbalanceView:
    """The job's imbalance (never a straggler): the GPUs involved with the pace signal their ratios
come from, the share of the job's GPU time spent waiting for them in the latest window and what it
rests on, and the GPU-seconds so far."""
    ranks: tuple[RankRatio, ...]
    basis: str
    lost_share: float
    cost_basis: str
    lost_gpu_seconds: float


BALANCED = ImbalanceView((), "compute_activity", 0.0, "compute_activity", 0.0)


@dataclass(frozen=True)
class StallView:
    """The stall in progress at the latest sample, if any, since when and why."""
    stalled: bool
    cause: str | None
    since: float | None
    evidence: dict[str, Any]   # numbers, flags; member_lost adds "missing": [{node, pod, gpus}]


@dataclass(frozen=True)
class LossView:
    """The job's loss counters as served (rounded)."""
    allocated_gpu_seconds: float
    lost_gpu_seconds: dict[str, float]
    goodput_ratio: float | None


@dataclass(frozen=True)
class JobView:
    job_id: str
    time: float | None                  # the latest sample scored
    gpus: tuple[ScoreView, ...]
    nodes: tuple[ScoreView, ...]
    stragglers: tuple[ScoreView, ...]   # the flagged ones of gpus, then of nodes
    stall: StallView
    loss: LossView
    imbalance: ImbalanceView = BALANCED
    coverage: float = 1.0               # the share of the window scored (below 1 while it is being fetched)

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class JobSummary:
    """A row of ``/api/v1/jobs``."""
    job_id: str
    time: float | None
    stalled: bool
    cause: str | None
    stragglers: tuple[ScoreView, ...]
    goodput_ratio: float | None
    coverage: float = 1.0

    @classmethod
    def of(cls, view: JobView) -> JobSummary:
        return cls(view.job_id, view.time, view.stall.stalled, view.stall.cause, view.stragglers,
                   view.loss.goodput_ratio, view.coverage)

    @classmethod
    def from_json(cls, row: dict) -> JobSummary:
        """A row as served; KeyError or TypeError when it is not one."""
        return cls(row["job_id"], row["time"], row["stalled"], row["cause"],
                   tuple(ScoreView(**s) for s in row["stragglers"]), row["goodput_ratio"], row.get("coverage", 1.0))

    def to_json(self) -> dict:
        return asdict(self)


def job_view(res: JobResult, counters: LossCounters) -> JobView:
    """The job as of its latest sample: GPU and node scores, the stall in progress, evidence; its loss."""
    i = len(res.times) - 1
    gpus, nodes = _scores(res, i)
    return JobView(job_id=res.job_id, time=float(res.times[i]) if i >= 0 else None, gpus=gpus, nodes=nodes,
                   stragglers=tuple(g for g in gpus + nodes if g.flagged), stall=_stall(res, i),
                   loss=loss_view(counters), imbalance=imbalance_view(res, counters))


def partial_view(res: JobResult, counters: LossCounters, coverage: float) -> JobView:
    """A job scored on the rows of its window fetched so far (``coverage`` of them): its scores and stall
    as of its latest sample, its loss as counted before (a window not fetched whole is not counted)."""
    return replace(job_view(res, counters), coverage=round(coverage, 4))


def _scores(res: JobResult, i: int) -> tuple[tuple[ScoreView, ...], tuple[ScoreView, ...]]:
    """Each GPU's and each node's view at sample ``i`` (the nodes' medians taken together, not node by node)."""
    s = res.stragglers
    perf, flagged = performance(s.scores[i]), s.flagged[i]
    gpus = tuple(ScoreView(node, gpu, float(perf[j]), bool(flagged[j]),
                           plain(gpu_evidence(s, i, j)) if flagged[j] else None)
                 for j, (_, node, gpu) in enumerate(res.columns))
    nodes_col = np.asarray(res.columns.get_level_values("node"))
    names, groups = node_columns(nodes_col)
    medians = performance(per_node(s.scores[i][None, :], groups, np.median)[0])
    nodes = []
    for k, node in enumerate(names):
        held = s.node_flagged.get(str(node))
        hit = bool(held[i]) if held is not None else False
        nodes.append(ScoreView(str(node), None, float(medians[k]), hit,
                               plain(node_evidence(s, nodes_col == node, i)) if hit else None))
    return gpus, tuple(nodes)


def imbalance_view(res: JobResult, counters: LossCounters) -> ImbalanceView:
    found = res.imbalance
    return ImbalanceView(tuple(RankRatio(r["node"], r["gpu"], r["ratio"]) for r in found["ranks"]), found["basis"],
                         found["lost_share"], found["cost_basis"], round(counters.imbalance, 1))


def _stall(res: JobResult, i: int) -> StallView:
    cause = str(res.causes[i]) if i >= 0 else ""
    since = i
    while since > 0 and res.causes[since - 1] == cause and cause:
        since -= 1
    return StallView(stalled=bool(cause), cause=cause or None, since=float(res.times[since]) if cause else None,
                     evidence=res.evidence[i] if cause else {})


def loss_view(c: LossCounters) -> LossView:
    goodput = c.goodput()
    return LossView(allocated_gpu_seconds=round(c.allocated, 1),
                    lost_gpu_seconds={k: round(v, 1) for k, v in c.lost.items()},
                    goodput_ratio=round(goodput, 4) if goodput is not None else None)
