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
from lockstep.analytics.scoring.detections import action, gpu_cause, gpu_evidence, node_cause, node_evidence
from lockstep.analytics.scoring.evidence import plain
from lockstep.analytics.scoring.score import JobResult
from lockstep.analytics.scoring.straggler import performance
from lockstep.analytics.service.state import LossCounters
from lockstep.exporters.catalog.enums import WORK


@dataclass(frozen=True)
class ScoreView:
    """A GPU's straggler score, or a node's (``gpu`` None: the median of its GPUs); while flagged, the
    evidence at the latest sample (the signals that agreed, each against its reference, and under
    ``cause`` what its hardware showed over the samples it is flagged in), its cause (hardware,
    transient, unknown: ``lockstep.analytics.scoring.cause``) and, for hardware, what to do."""
    node: str
    gpu: str | None
    score: float
    flagged: bool
    evidence: dict | None = None
    cause: str | None = None
    action: str | None = None


@dataclass(frozen=True)
class RankRatio:
    """A GPU off its job's median pace since it started: its usual pace as a ratio to the median, and
    why (work, or unknown where its hardware hints at more), with that evidence."""
    node: str
    gpu: str
    ratio: float
    cause: str = WORK
    evidence: dict | None = None


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
    cause: str = WORK


BALANCED = ImbalanceView((), "compute_activity", 0.0, "compute_activity", 0.0)


@dataclass(frozen=True)
class StallView:
    """The stall in progress at the latest sample, if any, since when and why."""
    stalled: bool
    cause: str | None
    since: float | None
    evidence: dict[str, Any]   # numbers, flags; member_lost adds "missing": [{node, pod, gpus}]; rank_stopped
    # and rank_dead add "culprits": [{node, gpu, rank, ras, collectives_behind (ras "behind"), last_collective}]


@dataclass(frozen=True)
class SlowdownView:
    """The job-wide slowdown in progress at the latest sample, if any: since when, why, the job's pace
    against its baseline (also while not slowed, once a baseline is known) and the evidence."""
    slowed: bool
    cause: str | None
    since: float | None
    pace_ratio: float | None
    evidence: dict[str, Any]


STEADY = SlowdownView(False, None, None, None, {})


@dataclass(frozen=True)
class CheckpointView:
    """The job's checkpoints counted so far (each once it ended), their seconds and bytes, and the last one:
    ``{start_timestamp, duration_s, bytes, bandwidth_bytes_per_second}``."""
    count: int
    seconds: float
    bytes: float
    last: dict[str, float] | None


NO_CHECKPOINTS = CheckpointView(0, 0.0, 0.0, None)


@dataclass(frozen=True)
class LossView:
    """The job's loss counters as served (rounded), and its goodput ledger (kind -> cause -> GPU-seconds,
    summing to the allocation)."""
    allocated_gpu_seconds: float
    lost_gpu_seconds: dict[str, float]
    goodput_ratio: float | None
    ledger: dict[str, dict[str, float]] | None = None


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
    slowdown: SlowdownView = STEADY
    coverage: float = 1.0               # the share of the window scored (below 1 while it is being fetched)
    checkpoints: CheckpointView = NO_CHECKPOINTS

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
                   loss=loss_view(counters), imbalance=imbalance_view(res, counters), slowdown=_slowdown(res, i),
                   checkpoints=CheckpointView(counters.checkpoints, round(counters.checkpoint_seconds, 1),
                                              counters.checkpoint_bytes, counters.last_checkpoint))


def partial_view(res: JobResult, counters: LossCounters, coverage: float) -> JobView:
    """A job scored on the rows of its window fetched so far (``coverage`` of them): its scores and stall
    as of its latest sample, its loss as counted before (a window not fetched whole is not counted)."""
    return replace(job_view(res, counters), coverage=round(coverage, 4))


def _scores(res: JobResult, i: int) -> tuple[tuple[ScoreView, ...], tuple[ScoreView, ...]]:
    """Each GPU's and node's score (the nodes' medians taken together, not node by node); a flagged one's
    cause is judged over every sample of the window it is flagged in (as the post-mortem's report of the
    same window judges it)."""
    s = res.stragglers
    perf, flagged = performance(s.scores[i]), s.flagged[i]
    gpus = []
    for j, (_, node, gpu) in enumerate(res.columns):
        if not flagged[j]:
            gpus.append(ScoreView(node, gpu, float(perf[j]), False, None))
            continue
        found, why = gpu_cause(s, j)
        gpus.append(ScoreView(node, gpu, float(perf[j]), True, plain({**gpu_evidence(s, i, j), "cause": why}), found,
                              action(node, gpu, found)))
    nodes_col = np.asarray(res.columns.get_level_values("node"))
    names, groups = node_columns(nodes_col)
    medians = performance(per_node(s.scores[i][None, :], groups, np.median)[0])
    nodes = []
    for k, node in enumerate(names):
        flags = s.node_flagged.get(str(node), np.zeros(i + 1, bool))
        if not flags[i]:
            nodes.append(ScoreView(str(node), None, float(medians[k]), False, None))
            continue
        mask = nodes_col == node
        found, why = node_cause(s, mask, flags)
        nodes.append(ScoreView(str(node), None, float(medians[k]), True,
                               plain({**node_evidence(s, mask, i), "cause": why}), found, action(str(node), None, found)))
    return tuple(gpus), tuple(nodes)


def imbalance_view(res: JobResult, counters: LossCounters) -> ImbalanceView:
    found = res.imbalance
    return ImbalanceView(tuple(RankRatio(r["node"], r["gpu"], r["ratio"], r["cause"], plain(r["evidence"]))
                               for r in found["ranks"]), found["basis"],
                         found["lost_share"], found["cost_basis"], round(counters.imbalance, 1), found["cause"])


def _stall(res: JobResult, i: int) -> StallView:
    cause = str(res.causes[i]) if i >= 0 else ""
    since = i
    while since > 0 and res.causes[since - 1] == cause and cause:
        since -= 1
    return StallView(stalled=bool(cause), cause=cause or None, since=float(res.times[since]) if cause else None,
                     evidence=res.evidence[i] if cause else {})


def _slowdown(res: JobResult, i: int) -> SlowdownView:
    s = res.slowdown
    if s is None or i < 0:
        return STEADY
    ratio = float(s.ratio[i]) if np.isfinite(s.ratio[i]) else None
    if not s.slowed[i]:
        return SlowdownView(False, None, None, round(ratio, 3) if ratio is not None else None, {})
    since = i
    while since > 0 and (s.slowed[since - 1] or res.causes[since - 1]):   # a stall inside it does not end it
        since -= 1
    while not s.slowed[since]:
        since += 1
    return SlowdownView(True, str(s.causes[i]), float(res.times[since]), round(ratio, 3) if ratio is not None else None,
                        plain(s.evidence[i]))


def loss_view(c: LossCounters) -> LossView:
    goodput = c.goodput()
    return LossView(allocated_gpu_seconds=round(c.allocated, 1),
                    lost_gpu_seconds={k: round(v, 1) for k, v in c.lost.items()},
                    goodput_ratio=round(goodput, 4) if goodput is not None else None,
                    ledger={kind: {cause: round(v, 1) for cause, v in by_cause.items()}
                            for kind, by_cause in c.ledger.items()})
