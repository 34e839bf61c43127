"""Straggler scoring per GPU and per node within a job (pure, over ``analytics.frame`` matrices).

In lockstep training the straggler is the rank that waits *least*: it stays busy while its peers
idle in the collective. Every signal compares a GPU with a robust reference over its job's peers
taken from the *healthy* end (a low quantile of activity, a high quantile of clock and throughput),
so the reference holds even when many peers are slow. A GPU is a candidate in a sample when at
least two signals agree, and flagged after ``PERSIST`` consecutive candidate samples (Minder-style
persistence). When most GPUs of a node are flagged together the node is reported (``gpu`` None).

Signals: activity (SM/tensor) above the fast ranks, SM clock below the best, a throttle clock-event
reason, rail throughput below the best, transmit-wait above the peers, and the rank's own step time
(``lockstep_rank_step_seconds``) above the fast ranks where the job exports it. An IsolationForest
over these per-GPU strength vectors is not used (bench/bench_isolation_forest.py: 12 scenarios, 20
truth GPU windows, contamination 1/GPUs of the job): alone it finds 6 windows (20 with 3 false flag
runs at 0.1, 195 false runs at "auto"); ANDed with these flags it keeps those 6; ORed it adds no
window and no false flag, only one detection 5 s sooner; and it costs about the CPU of the scoring
pass itself (~2.5-3 s against ~2.6-3.5 s over the 12 scenarios).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from analytics.frame import Features
from analytics.stall import JobSignals, nan_reduce

BUSY_SLOWDOWN = 0.08      # ≥ 8% more busy than the fast ranks: a real step-time shift (Alibaba: ≥ 10%)
CLOCK_DEFICIT = 0.05      # SM clock ≥ 5% below the best ranks
TX_DEFICIT = 0.15         # rail throughput ≥ 15% below the best rails
WAIT_EXCESS = 3.0         # xmit-wait ≥ 3× the peers' median
PERSIST_S = 20.0          # consecutive seconds of agreement before a flag
NODE_SHARE = 0.75         # this share of a node's GPUs flagged together → node-wide slowdown
LOW_Q, HIGH_Q = 0.25, 0.9


@dataclass(frozen=True)
class StragglerResult:
    scores: np.ndarray        # times × GPUs, 0 normal … 1 (share of the step the job waits for the GPU)
    votes: np.ndarray         # times × GPUs, number of agreeing signals
    flagged: np.ndarray       # times × GPUs, bool, after persistence
    node_flagged: dict[str, np.ndarray]   # node → bool per sample (node-wide slowdown)
    holding: np.ndarray       # times × GPUs: flagged, or in the candidate run that led to a flag
    node_holding: dict[str, np.ndarray]


def _deficit(values: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """1 - value/reference, 0 where either is missing."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = 1.0 - values / reference[:, None]
    return np.nan_to_num(np.clip(out, 0.0, 1.0))


def signal_votes(js: JobSignals, sig: dict[str, np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Per-sample, per-GPU agreement count and the per-signal strengths behind it."""
    busy_ref = nan_reduce(np.nanquantile, js.busy, LOW_Q, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        busy_slow = np.nan_to_num(np.clip(1.0 - busy_ref[:, None] / js.busy, 0.0, 1.0))
    clock_def = _deficit(sig["clock"], nan_reduce(np.nanquantile, sig["clock"], HIGH_Q, axis=1))
    tx_def = _deficit(sig["tx"], nan_reduce(np.nanquantile, sig["tx"], HIGH_Q, axis=1))
    step_ref = nan_reduce(np.nanquantile, sig["step"], LOW_Q, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        step_slow = np.nan_to_num(np.clip(1.0 - step_ref[:, None] / sig["step"], 0.0, 1.0))
    throttle = np.nan_to_num(sig["throttle"]) > 0
    throttle &= ~(throttle.mean(axis=1, keepdims=True) > 0.5)      # a cluster-wide cap is not a straggler
    wait = np.nan_to_num(sig["xmit_wait"])
    wait_med = np.median(wait, axis=1, keepdims=True)
    wait_high = (wait > WAIT_EXCESS * wait_med) & (wait > 0)
    strengths = {"busy": busy_slow, "clock": clock_def, "tx": tx_def, "step": step_slow}
    votes = ((busy_slow >= BUSY_SLOWDOWN).astype(np.int8) + (clock_def >= CLOCK_DEFICIT)
             + throttle + (tx_def >= TX_DEFICIT) + wait_high + (step_slow >= BUSY_SLOWDOWN))
    return votes, {**strengths, "throttle": throttle.astype(float)}


def persistent(candidate: np.ndarray, samples: int) -> np.ndarray:
    """True where the candidate has held for ``samples`` consecutive rows (per column)."""
    run = np.zeros(candidate.shape[1], dtype=np.int32)
    out = np.zeros_like(candidate, dtype=bool)
    for i, row in enumerate(candidate):
        run = np.where(row, run + 1, 0)
        out[i] = run >= samples
    return out


def whole_runs(flagged: np.ndarray, candidate: np.ndarray) -> np.ndarray:
    """``flagged`` extended back over the candidate run that led to each flag: once a slowdown is
    confirmed, the samples before the confirmation were lost to it too (used by the loss account)."""
    out = flagged.copy()
    for i in range(len(out) - 2, -1, -1):
        out[i] |= out[i + 1] & candidate[i]
    return out


def score(features: Features, job_id: str, js: JobSignals, causes: np.ndarray, period: float) -> StragglerResult:
    cols = features.job_slice(job_id)
    sig = {name: m[:, cols] for name, m in features.signals.items()}
    votes, strength = signal_votes(js, sig)
    scores = np.maximum(strength["busy"], strength["clock"])
    # Other stalls are the stall classifier's business; a stall caused by a straggler is still scored.
    active = ((causes == "") | (causes == "straggler"))[:, None]
    scores = np.where(active, scores, 0.0)
    nodes = np.asarray(features.columns[cols].get_level_values("node"))
    candidate = active & (votes >= 2)
    node_cand = _node_candidates(nodes, active & (strength["busy"] >= BUSY_SLOWDOWN))
    samples = max(1, int(round(PERSIST_S / period)))
    node_flagged = {n: persistent(c[:, None], samples)[:, 0] for n, c in node_cand.items()}
    node_holding = {n: whole_runs(f[:, None], node_cand[n][:, None])[:, 0] for n, f in node_flagged.items()}
    flagged = persistent(candidate, samples)
    holding = whole_runs(flagged, candidate)
    for node, flags in node_holding.items():       # a node-wide slowdown is reported for the node only
        flagged[:, nodes == node] &= ~flags[:, None]
        holding[:, nodes == node] &= ~flags[:, None]
    return StragglerResult(scores, votes, flagged, node_flagged, holding, node_holding)


def _node_candidates(nodes: np.ndarray, busy_hit: np.ndarray) -> dict[str, np.ndarray]:
    """Nodes whose GPUs mostly run slow together while the rest of the job does not: the agreement of
    independent GPUs on one node is the second signal for a node-wide slowdown."""
    out = {}
    job_share = busy_hit.mean(axis=1)
    for node in pd.unique(nodes):
        mask = nodes == node
        share = busy_hit[:, mask].mean(axis=1)
        cand = (share >= NODE_SHARE) & (mask.sum() >= 2) & (job_share < 0.5)
        if cand.any():
            out[str(node)] = cand
    return out


def performance(slowdown):
    """The reported score: the rank's speed relative to the best ranks (1.0 keeps up; 0.7 means a
    0.7x straggler), the convention of the contract's examples and of NVIDIA's straggler detection.
    Internally ``scores`` count the other way (share of the step the job waits for the GPU)."""
    return np.round(1.0 - np.asarray(slowdown, dtype=float), 3)


def detections(features: Features, job_id: str, res: StragglerResult, start: float) -> list[dict]:
    """First flag of each GPU/node: ``{job_id, node, gpu, first_detected_s, score}`` (contract); the
    score is the worst performance while flagged."""
    cols = features.columns[features.job_slice(job_id)]
    out = []
    for j in np.flatnonzero(res.flagged.any(axis=0)):
        i = int(np.argmax(res.flagged[:, j]))
        _, node, gpu = cols[j]
        out.append({"job_id": job_id, "node": node, "gpu": gpu, "first_detected_s": float(features.times[i] - start),
                    "score": float(performance(np.max(res.scores[res.flagged[:, j], j])))})
    nodes = np.asarray(cols.get_level_values("node"))
    for node, flags in res.node_flagged.items():
        if flags.any():
            i = int(np.argmax(flags))
            node_scores = np.median(res.scores[:, nodes == node], axis=1)
            out.append({"job_id": job_id, "node": node, "gpu": None, "first_detected_s": float(features.times[i] - start),
                        "score": float(performance(np.max(node_scores[flags])))})
    return sorted(out, key=lambda d: d["first_detected_s"])
