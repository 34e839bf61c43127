"""One scoring pass over a long series frame: straggler, stall and loss results for every job.

The service, the evaluation harness and the monthly report all call ``score_frame``; only where
the frame comes from differs (analytics.source_prom, or the simulator's series).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from lockstep.analytics.frame.features import Features
from lockstep.analytics.scoring import hang, imbalance, loss, stall, straggler
from lockstep.analytics.scoring.detections import detections
from lockstep.analytics.scoring.nanstats import nan_reduce


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
    imbalance: dict                         # job-level finding (evaluation report ``imbalance`` row)
    imbalance_lost: np.ndarray              # GPU-seconds lost to the imbalance per sample
    learned: pd.DataFrame                   # each GPU's usual level per pace signal (index: node, gpu)
    culprits: np.ndarray | None = None      # times × GPUs: a rank the hung job waits for (scoring/hang.py)
    hangs: tuple[dict, ...] = ()            # each rank named, once (evaluation report ``hangs`` rows)


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
    return float(np.mean(js.progress[clean]))    # clean samples: the expected level, jitter and all


def _passes(features: Features, job_id: str, period: float, baseline: float | None, prior: dict | None):
    js = stall.job_signals(features, job_id)
    if baseline is not None:
        js = replace(js, baseline=baseline)
    causes, evidence = stall.classify(js)
    res = straggler.score(features, job_id, js, causes, period, prior)
    learned = clean_baseline(js, causes, res)
    if baseline is None and learned is not None and abs(learned - js.baseline) > 0.02 * js.baseline:
        return _passes(features, job_id, period, learned, prior)
    return js, causes, evidence, res, learned


def peer_progress(js: stall.JobSignals, res: straggler.StragglerResult, nodes: np.ndarray) -> np.ndarray:
    """The job's progress read on the GPUs that wait: the median over those not holding the job back
    (the slow ones compute longer, and with a node of them the median of all sits a little high)."""
    holding = res.holding.copy()
    for node, flags in res.node_holding.items():
        holding[:, nodes == node] |= flags[:, None]
    peers = np.where(holding, np.nan, js.work)
    return np.where(holding.all(axis=1), js.progress, nan_reduce(np.nanmedian, peers, axis=1))


def _prior(columns: pd.MultiIndex, learned: pd.DataFrame | None) -> dict[str, np.ndarray] | None:
    """Usual levels remembered from an earlier window, aligned to this window's GPUs (NaN: new GPU)."""
    if learned is None or learned.empty:
        return None
    keys = pd.MultiIndex.from_arrays([columns.get_level_values("node"), columns.get_level_values("gpu")])
    aligned = learned.reindex(keys)
    return {name: aligned[name].to_numpy(dtype=float) for name in learned.columns}


def job_imbalance(job_id: str, columns: pd.MultiIndex, res: straggler.StragglerResult, causes: np.ndarray,
                  period: float) -> tuple[dict, np.ndarray]:
    """The finding and the GPU-seconds it costs per sample: counted while the job runs with no
    straggler holding it back (a stall or a straggler sets the pace then, not the imbalance). The
    ranks and their ratios come from compute activity (in lockstep training every rank's activity is
    its compute time over the one shared step time: the purest measure of its pace); the waiting
    they cost from the ranks' own step times where the job exports them (the all-reduce takes
    everyone the same time), else from activity."""
    usual = res.drifts["work"].learned
    cost = "step" if np.isfinite(res.drifts["step"].learned).any() else "work"
    holding = res.holding.any(axis=1)
    for flags in res.node_holding.values():
        holding |= flags
    running = (causes == "") & ~holding
    hit = imbalance.involved(usual)
    share = imbalance.lost_share(res.drifts[cost].learned, hit)
    per_sample = np.where(running, share * len(columns) * period, 0.0)
    per_sample[:1] = 0.0      # the first sample closes an interval before the data (as the loss account)
    ranks = [{"node": node, "gpu": gpu} for _, node, gpu in columns]
    found = imbalance.finding(ranks, usual, "compute_activity", float(per_sample.sum()), "lost_gpu_seconds", hit)
    return {"job_id": job_id, **found, "lost_share": round(share, 4),
            "cost_basis": {"step": "step_seconds", "work": "compute_activity"}[cost]}, per_sample


def score_job(features: Features, job_id: str, start: float, period: float,
              baseline: float | None = None, learned: pd.DataFrame | None = None) -> JobResult:
    """``baseline``: the job's productive level learned earlier (the service keeps it between
    refreshes), used when this window has no clean stretch to learn it from; ``learned``: each
    GPU's usual pace among its peers from an earlier window (``JobResult.learned``), so a slowdown
    that began before this window is still one."""
    cols = features.job_slice(job_id)
    prior = _prior(features.columns[cols], learned)
    js, causes, evidence, res, level = _passes(features, job_id, period, None, prior)
    if level is None and baseline is not None:
        js, causes, evidence, res, level = _passes(features, job_id, period, baseline, prior)
    hung = hang.localise(features, job_id, causes, evidence)      # a hang's ranks, where NCCL's RAS names them
    causes, evidence = hung.causes, hung.evidence
    # The throttled GPUs' own extra compute is the `throttle` loss: a clock that fell or a throttling
    # reason the GPU took on (a reason most of the job holds all along, like sw_power_cap, is not one).
    throttled = res.hits["clock"] | res.hits["reason"]
    # The loss account measures against the clean level learned (the first pass's high quantile sits
    # above a jittering job's typical level; the stall classes do not hinge on that difference).
    nodes = np.asarray(features.columns[cols].get_level_values("node"))
    js = replace(js, baseline=level if level is not None else js.baseline, progress=peer_progress(js, res, nodes))
    lost = loss.lost_by_cause(js, causes, res, throttled, period)
    found, imbalance_lost = job_imbalance(job_id, features.columns[cols], res, causes, period)
    keys = pd.MultiIndex.from_arrays([features.columns[cols].get_level_values(n) for n in ("node", "gpu")])
    usual = pd.DataFrame({name: d.learned for name, d in res.drifts.items()}, index=keys)
    return JobResult(
        job_id=job_id, columns=features.columns[cols], times=features.times, stragglers=res,
        causes=causes, stalled_s=stall.stalled_seconds(js, causes, period), evidence=evidence, lost=lost,
        detections=detections(features, job_id, res, start),
        stalls=stall.stall_intervals(job_id, js, causes, evidence, start, period),
        loss=loss.account(job_id, js, lost, period), baseline=level, imbalance=found,
        imbalance_lost=imbalance_lost, learned=usual, culprits=hung.culprits,
        hangs=tuple(hang.findings(features, job_id, hung, start)))


def score_features(features: Features, start: float | None = None, period: float | None = None,
                   jobs: list[str] | None = None, baselines: dict[str, float] | None = None,
                   learned: dict[str, pd.DataFrame] | None = None) -> dict[str, JobResult]:
    period = period or infer_period(features.times)
    if start is None:
        start = float(features.times[0]) if len(features.times) else 0.0
    baselines, learned = baselines or {}, learned or {}
    return {job: score_job(features, job, start, period, baselines.get(job), learned.get(job))
            for job in (jobs or features.jobs())}
