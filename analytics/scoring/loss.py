"""Utilization-loss account: allocated GPU-seconds per job split into productive and lost by cause.

Each sample covers ``period`` seconds of every GPU of the job. The job's progress against its own
baseline says what share of those GPU-seconds produced work; the rest is lost. It goes to the stall
cause while the job is stalled; while a GPU or node holds the job back it is the peers' waiting
(``straggler``) except the throttled GPUs' own share (``throttle``: their extra compute time);
otherwise it is jitter nobody can act on and counts as productive. A job-wide slowdown adds its cost to
the cause it names (``SLOWDOWN_LOSS``); the goodput ledger (``lockstep.analytics.scoring.ledger``) is the
complete account.
"""
from __future__ import annotations

import numpy as np

from lockstep.analytics.scoring.slowdown import SlowdownResult
from lockstep.analytics.scoring.stall import JobSignals
from lockstep.analytics.scoring.straggler import StragglerResult
from lockstep.exporters.catalog.enums import CHECKPOINT, LOSS_CAUSES, NETWORK, POWER, STORAGE, THROTTLE

# A job-wide slowdown's loss cause, where the account has one: a cap on every GPU is time lost running
# slow (throttle); one of no known cause is in the goodput ledger only (lockstep.analytics.scoring.ledger).
SLOWDOWN_LOSS = {STORAGE: STORAGE, NETWORK: NETWORK, CHECKPOINT: CHECKPOINT, POWER: THROTTLE}


def lost_share(js: JobSignals) -> np.ndarray:
    """Per-sample share of the job's GPU time that did no work (0 … 1)."""
    if not js.baseline or not np.isfinite(js.baseline):
        return np.zeros(len(js.times))
    return np.clip(1.0 - np.nan_to_num(js.progress) / js.baseline, 0.0, 1.0)


def _ffill(values: np.ndarray, known: np.ndarray) -> np.ndarray:
    """``values`` where ``known``, else the last known value before (0 before the first)."""
    idx = np.where(known, np.arange(len(values)), -1)
    idx = np.maximum.accumulate(idx)
    return np.where(idx >= 0, values[np.maximum(idx, 0)], 0.0)


def lost_by_cause(js: JobSignals, causes: np.ndarray, res: StragglerResult, throttled: np.ndarray,
                  period: float) -> dict[str, np.ndarray]:
    """GPU-seconds lost per sample, by cause.

    While a straggler holds the job back, a stall (a checkpoint, a rail down) only adds its own
    share on top: the loss level of the last running sample is carried through the stall and
    what the stall adds beyond it goes to the stall's cause (shares multiply: the job runs for
    (1 - blocked) of the sample, and loses the straggler's share of that)."""
    n_gpus = js.busy.shape[1]
    total = lost_share(js)
    holding = res.holding.any(axis=1)
    for flags in res.node_holding.values():
        holding |= flags
    running = (causes == "") | (causes == "straggler")
    level = _ffill(np.where(holding, total, 0.0), running)          # straggler loss share while running
    # The throttled GPUs' own extra compute is `throttle`; every peer's waiting is `straggler`.
    own_share = _ffill((res.holding & throttled).sum(axis=1) / max(n_gpus, 1), running)
    blocked = np.where(running, 0.0, np.clip(1.0 - (1.0 - total) / np.maximum(1.0 - level, 1e-12), 0.0, 1.0))
    slow = np.where(running, np.where(holding, total, 0.0), total - blocked)
    gpu_s = n_gpus * period
    out = {cause: np.where(causes == cause, blocked * gpu_s, 0.0) for cause in LOSS_CAUSES}
    out["throttle"] = slow * own_share * gpu_s
    out["straggler"] = slow * (1.0 - own_share) * gpu_s
    return out


def added(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``a`` with ``b``'s values added, cause by cause."""
    return {cause: a[cause] + b.get(cause, 0.0) for cause in a}


def with_slowdowns(by_cause: dict[str, np.ndarray], slow: SlowdownResult) -> dict[str, np.ndarray]:
    """The account's causes with what job-wide slowdowns cost added (``SLOWDOWN_LOSS``)."""
    out = dict(by_cause)
    for cause, into in SLOWDOWN_LOSS.items():
        out[into] = out[into] + np.where(slow.causes == cause, slow.lost, 0.0)
    return out


def sample_causes(by_cause: dict[str, np.ndarray]) -> np.ndarray:
    """The main loss cause of each sample ('' when nothing was lost to a cause)."""
    names = np.array(("",) + LOSS_CAUSES, dtype=object)
    stacked = np.stack([np.zeros_like(by_cause["hang"])] + [by_cause[c] for c in LOSS_CAUSES])
    return names[np.argmax(stacked, axis=0)]


def account(job_id: str, js: JobSignals, by_cause: dict[str, np.ndarray], period: float) -> dict:
    """``{job_id, allocated_gpu_seconds, lost_gpu_seconds: {cause: s}, goodput_ratio}`` (contract)."""
    # The first sample closes an interval that lies before the data: it is not accounted.
    allocated = float(js.busy.shape[1] * period * max(len(js.times) - 1, 0))
    lost = {cause: round(float(by_cause[cause].sum()), 1) for cause in LOSS_CAUSES}
    goodput = 1.0 - sum(lost.values()) / allocated if allocated else None
    return {"job_id": job_id, "allocated_gpu_seconds": allocated, "lost_gpu_seconds": lost,
            "goodput_ratio": round(goodput, 4) if goodput is not None else None}
