"""One scoring pass over a long series frame: straggler, stall and loss results for every job.

The service, the evaluation harness and the monthly report all call ``score_frame``; only where
the frame comes from differs (analytics.source_prom, or the simulator's series).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from analytics import loss, stall, straggler
from analytics.frame import Features, build_features


@dataclass(frozen=True)
class JobResult:
    job_id: str
    columns: pd.MultiIndex                  # (job_id, node, gpu) of the job's GPUs
    times: np.ndarray
    stragglers: straggler.StragglerResult
    causes: np.ndarray                      # stall cause per sample ('' when not stalled)
    stalled_s: np.ndarray                   # seconds of each sample the job stood still
    evidence: list[dict]
    lost: dict[str, np.ndarray]             # GPU-seconds lost per sample, by cause
    detections: list[dict]                  # first flag per GPU/node (evaluation report rows)
    stalls: list[dict]                      # stall intervals with cause and evidence
    loss: dict                              # loss account (evaluation report shape)
    baseline: float | None                  # productive level learned from clean samples, if any


def infer_period(times: np.ndarray) -> float:
    steps = np.diff(times)
    return float(np.median(steps)) if len(steps) else 1.0


MIN_CLEAN = 6        # samples with neither a stall nor a straggler needed to learn the baseline


def clean_baseline(js: stall.JobSignals, causes: np.ndarray, res: straggler.StragglerResult) -> float | None:
    """The job's productive level over samples where nothing held it back, if there are enough.

    The first pass takes a high quantile over the whole window, which is the *slowed* level when a
    straggler lasts most of the window; the loss account needs the unimpeded one."""
    holding = res.holding.any(axis=1)
    for flags in res.node_holding.values():
        holding |= flags
    clean = (causes == "") & ~holding & np.isfinite(js.progress)
    if clean.sum() < MIN_CLEAN:
        return None
    return float(np.quantile(js.progress[clean], 0.9))


def _passes(features: Features, job_id: str, period: float, baseline: float | None):
    js = stall.job_signals(features, job_id)
    if baseline is not None:
        js = replace(js, baseline=baseline)
    causes, evidence = stall.classify(js)
    res = straggler.score(features, job_id, js, causes, period)
    learned = clean_baseline(js, causes, res)
    if baseline is None and learned is not None and abs(learned - js.baseline) > 0.02 * js.baseline:
        return _passes(features, job_id, period, learned)
    return js, causes, evidence, res, learned


def score_job(features: Features, job_id: str, start: float, period: float,
              baseline: float | None = None) -> JobResult:
    """``baseline``: the job's productive level learned earlier (the service keeps it between
    refreshes), used when this window has no clean stretch to learn it from."""
    js, causes, evidence, res, learned = _passes(features, job_id, period, None)
    if learned is None and baseline is not None:
        js, causes, evidence, res, learned = _passes(features, job_id, period, baseline)
    cols = features.job_slice(job_id)
    throttled = np.nan_to_num(features.signals["throttle"][:, cols]) > 0
    lost = loss.lost_by_cause(js, causes, res, throttled, period)
    return JobResult(
        job_id=job_id, columns=features.columns[cols], times=features.times, stragglers=res,
        causes=causes, stalled_s=stall.stalled_seconds(js, causes, period), evidence=evidence, lost=lost,
        detections=straggler.detections(features, job_id, res, start),
        stalls=stall.stall_intervals(job_id, js, causes, evidence, start, period),
        loss=loss.account(job_id, js, lost, period), baseline=learned)


def score_features(features: Features, start: float | None = None, period: float | None = None,
                   jobs: list[str] | None = None, baselines: dict[str, float] | None = None) -> dict[str, JobResult]:
    period = period or infer_period(features.times)
    if start is None:
        start = float(features.times[0]) if len(features.times) else 0.0
    baselines = baselines or {}
    return {job: score_job(features, job, start, period, baselines.get(job)) for job in (jobs or features.jobs())}


def score_frame(frame: pd.DataFrame, start: float | None = None, period: float | None = None) -> dict[str, JobResult]:
    """Score every job in a FORMATS.md series frame."""
    return score_features(build_features(frame), start, period)
