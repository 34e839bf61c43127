"""The goodput ledger: every allocated GPU-second of a job, productive or lost to exactly one (kind, cause)
of ``lockstep.exporters.catalog.enums.LEDGER`` (pure, per sample).

Each sample after the first accounts ``GPUs × period`` (the first closes an interval before the data).
The losses come from the scorers, each where it sets the job's pace: a stall's blocked time by its
cause (checkpoint stalls under kind ``checkpoint``); a straggler's cost (the peers' waiting and its
own extra time) by the cause of the GPUs holding the job back at that sample, or ``stall/straggler``
when it stalls the job; what GPUs slow since they started cost (``straggler/hardware``); a job-wide
slowdown by its cause (one a checkpoint causes under ``checkpoint``); an idle allocation whole;
imbalance by its ranks' cause, its share of what the others leave of the sample (their losses are
measured against the job's own imbalanced pace). What is left is productive, so the kinds sum to the
allocation by construction; where the losses of a sample would exceed it (they are estimated apart),
they are scaled down to it.
"""
from __future__ import annotations

import numpy as np

from lockstep.analytics.scoring import slowdown
from lockstep.analytics.scoring.slowdown import SlowdownResult
from lockstep.exporters.catalog.enums import CHECKPOINT, LEDGER, STRAGGLER, UNKNOWN

Ledger = dict[str, dict[str, np.ndarray]]

# How long after a sample its (kind, cause) may still change as later samples come: a job-wide slowdown is
# reported once the job's pace, averaged over its last SMOOTH_S, stayed low for PERSIST_S, and is counted
# from where it began. The running service books a sample once it is this old (docs/analytics.md).
SETTLE_S = slowdown.PERSIST_S + slowdown.SMOOTH_S


def per_sample(n_gpus: int, period: float, causes: np.ndarray, lost: dict[str, np.ndarray],
               holders: np.ndarray, holder_causes: np.ndarray, since_start: dict[str, np.ndarray],
               imbalance_share: dict[str, float], slow: SlowdownResult, idle: np.ndarray) -> Ledger:
    """GPU-seconds per sample by kind and cause. ``lost``: the stall and straggler losses per loss cause
    (``lockstep.analytics.scoring.loss.lost_by_cause``); ``holders``: times × GPUs holding the job back,
    ``holder_causes`` each GPU's straggler cause; ``since_start``: what GPUs slow since they started cost
    (straggler, throttle); ``imbalance_share``: by cause, the share of the job's running time its ranks
    wait for the imbalance (counted on what the other findings leave of each sample: their losses are
    measured against the job's own imbalanced pace); ``idle``: samples the job runs nothing."""
    t = len(causes)
    zero = np.zeros(t)
    out: Ledger = {kind: {cause: zero.copy() for cause in kinds} for kind, kinds in LEDGER.items()}
    allocated = np.where(np.arange(t) > 0, n_gpus * period, 0.0)
    for cause in LEDGER["stall"]:        # a hang localised to its ranks (rank_stopped, rank_dead) included
        if cause != STRAGGLER:
            out["stall"][cause] += lost[cause]
    out[CHECKPOINT][CHECKPOINT] += lost[CHECKPOINT]
    running_cost = lost[STRAGGLER] + lost["throttle"]
    stalled = causes == STRAGGLER
    out["stall"][STRAGGLER] += np.where(stalled, running_cost, 0.0)
    for cause, share in _shares(holders, holder_causes).items():
        out[STRAGGLER][cause] += np.where(stalled, 0.0, running_cost * share)
    out[STRAGGLER]["hardware"] += since_start[STRAGGLER] + since_start["throttle"]
    for cause in np.unique(slow.causes[slow.slowed].astype(str)):
        values = np.where(slow.causes == cause, slow.lost, 0.0)
        out[CHECKPOINT if cause == CHECKPOINT else "slowdown"][cause if cause else UNKNOWN] += values
    out["idle"][""] += np.where(idle & (causes == ""), allocated, 0.0)
    left = np.clip(allocated - sum(v for kind, c in out.items() if kind != "productive" for v in c.values()), 0.0, None)
    for cause, share in imbalance_share.items():      # of what the other findings leave of each sample
        out["imbalance"][cause] += np.where(idle, 0.0, left * share)
    lost_total = sum(v for kind, c in out.items() if kind != "productive" for v in c.values())
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = np.where(lost_total > allocated, allocated / lost_total, 1.0)
    for by_cause in out.values():
        for cause in by_cause:
            by_cause[cause] = np.nan_to_num(by_cause[cause] * scale)
    out["productive"][""] = allocated - sum(v for kind, c in out.items() if kind != "productive" for v in c.values())
    return out


def _shares(holders: np.ndarray, holder_causes: np.ndarray) -> dict[str, np.ndarray]:
    """Per straggler cause, its share of the GPUs holding the job back at each sample; a sample with
    none (a straggler's loss carried through a stall) takes the shares of the last one that had some,
    and ``unknown`` before any."""
    causes = sorted({str(c) for c in holder_causes if c})
    counts = np.stack([(holders & (holder_causes == c)[None, :]).sum(axis=1) for c in causes]) if causes \
        else np.zeros((0, holders.shape[0]))
    total = counts.sum(axis=0)
    known = np.maximum.accumulate(np.where(total > 0, np.arange(len(total)), -1))
    out = {c: np.where(known >= 0, counts[k, np.maximum(known, 0)] / np.maximum(total[np.maximum(known, 0)], 1), 0.0)
           for k, c in enumerate(causes)}
    out[UNKNOWN] = out.get(UNKNOWN, 0.0) + (known < 0)
    return out


def totals(ledger: Ledger, mask: np.ndarray | None = None) -> dict[str, dict[str, float]]:
    """GPU-seconds by kind and cause, summed over the samples (of ``mask``)."""
    return {kind: {cause: float(v.sum() if mask is None else v[mask].sum()) for cause, v in by_cause.items()}
            for kind, by_cause in ledger.items()}


def account(job_id: str, ledger: Ledger, allocated: float) -> dict:
    """``{job_id, allocated_gpu_seconds, gpu_seconds: {kind: {cause: s}}}``: the report's ``ledger`` (its
    kinds sum to ``allocated``, the loss account's allocation)."""
    return {"job_id": job_id, "allocated_gpu_seconds": allocated, "gpu_seconds": totals(ledger)}
