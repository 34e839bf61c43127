"""What the service serves: the latest scores per job, cumulative loss counters, its own health.

``Results`` is replaced as a whole after each refresh (readers never see half an update); the loss
counters add only samples newer than the last ones already accounted, so overlapping windows are
never counted twice.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from analytics.loss import LOSS_CAUSES
from analytics.score import JobResult
from analytics.stall import CAUSES
from analytics.straggler import performance
from exporters.catalog import analytics as cat
from exporters.sample import Sample


@dataclass
class Health:
    up: bool = False
    stale: bool = False
    last_success: float | None = None
    failures: int = 0
    duration_s: float = 0.0
    rejected_job_ids: tuple[str, ...] = ()
    last_error: str = ""


@dataclass
class LossCounters:
    accounted_until: float = float("-inf")
    allocated: float = 0.0
    lost: dict[str, float] = field(default_factory=lambda: dict.fromkeys(LOSS_CAUSES, 0.0))

    def add(self, res: JobResult, period: float) -> None:
        if self.accounted_until == float("-inf") and len(res.times):
            self.accounted_until = float(res.times[0])   # its interval lies before the data
        new = res.times > self.accounted_until
        if not new.any():
            return
        self.allocated += float(new.sum()) * period * len(res.columns)
        for cause in LOSS_CAUSES:
            self.lost[cause] += float(res.lost[cause][new].sum())
        self.accounted_until = float(res.times[new][-1])

    def behind(self, window_start: float, period: float) -> bool:
        """Counted before, but not up to the sample before ``window_start``: a gap to catch up first."""
        return float("-inf") < self.accounted_until < window_start - period

    def goodput(self) -> float | None:
        return 1.0 - sum(self.lost.values()) / self.allocated if self.allocated else None


def current(res: JobResult) -> dict:
    """The job as of its latest sample: GPU and node scores, the stall in progress, evidence."""
    i = len(res.times) - 1
    s = res.stragglers
    gpus = [{"node": node, "gpu": gpu, "score": float(performance(s.scores[i, j])), "flagged": bool(s.flagged[i, j])}
            for j, (_, node, gpu) in enumerate(res.columns)]
    nodes_col = np.asarray(res.columns.get_level_values("node"))
    nodes = [{"node": str(node), "gpu": None, "score": float(performance(np.median(s.scores[i, nodes_col == node]))),
              "flagged": bool(s.node_flagged.get(str(node), np.zeros(i + 1, bool))[i])}
             for node in dict.fromkeys(nodes_col)]
    cause = str(res.causes[i]) if i >= 0 else ""
    since = i
    while since > 0 and res.causes[since - 1] == cause and cause:
        since -= 1
    stall = {"stalled": bool(cause), "cause": cause or None,
             "since": float(res.times[since]) if cause else None, "evidence": res.evidence[i] if cause else {}}
    return {"job_id": res.job_id, "time": float(res.times[i]) if i >= 0 else None, "gpus": gpus, "nodes": nodes,
            "stragglers": [g for g in gpus + nodes if g["flagged"]], "stall": stall}


@dataclass(frozen=True)
class Results:
    jobs: dict[str, dict]              # job_id → current(...) view plus "loss"
    updated: float | None = None
    # Copies of the loss counters as of this refresh: /metrics renders in a worker thread while the
    # next refresh adds to (and drops finished jobs from) the live ones.
    losses: dict[str, LossCounters] = field(default_factory=dict)


def job_samples(view: dict, loss: LossCounters) -> list[Sample]:
    job = view["job_id"]
    out = []
    for row in view["gpus"] + view["nodes"]:
        labels = (job, row["node"], row["gpu"] or "")
        out.append(Sample(cat.STRAGGLER_SCORE, labels, row["score"]))
        out.append(Sample(cat.STRAGGLER_FLAGGED, labels, float(row["flagged"])))
    for cause in CAUSES:
        out.append(Sample(cat.JOB_STALLED, (job, cause), float(view["stall"]["cause"] == cause)))
    for cause in LOSS_CAUSES:
        out.append(Sample(cat.JOB_LOST_GPU_SECONDS, (job, cause), round(loss.lost[cause], 3)))
    out.append(Sample(cat.JOB_ALLOCATED_GPU_SECONDS, (job,), loss.allocated))
    if loss.accounted_until > float("-inf"):
        out.append(Sample(cat.JOB_ACCOUNTED_UNTIL, (job,), loss.accounted_until))
    if (goodput := loss.goodput()) is not None:
        out.append(Sample(cat.JOB_GOODPUT, (job,), round(goodput, 6)))
    return out


def health_samples(h: Health, jobs: int) -> list[Sample]:
    out = [Sample(cat.ANALYTICS_UP, (), float(h.up)), Sample(cat.ANALYTICS_STALE, (), float(h.stale)),
           Sample(cat.ANALYTICS_REFRESH_FAILURES, (), float(h.failures)),
           Sample(cat.ANALYTICS_REFRESH_DURATION, (), round(h.duration_s, 6)),
           Sample(cat.ANALYTICS_JOBS, (), float(jobs)),
           Sample(cat.ANALYTICS_REJECTED_JOB_IDS, (), float(len(h.rejected_job_ids)))]
    if h.last_success is not None:
        out.append(Sample(cat.ANALYTICS_LAST_SUCCESS, (), h.last_success))
    return out
