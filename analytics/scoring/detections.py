"""First flag of each GPU or node, with the evidence at that moment and the cause its flags show
(evaluation report rows)."""
from __future__ import annotations

import numpy as np

from lockstep.analytics.frame.features import Features
from lockstep.analytics.scoring import cause, evidence, views
from lockstep.analytics.scoring.nanstats import nan_reduce
from lockstep.analytics.scoring.straggler import PACE, StragglerResult, performance
from lockstep.exporters.catalog.enums import HARDWARE, HOST, TRANSIENT


def pace_gap(res: StragglerResult, rows: np.ndarray, j: int) -> float:
    """How much slower GPU ``j`` ran over ``rows`` (log): its usual pace against the median where it was
    flagged as slow since it started, else how much slower than usual it became."""
    if res.since_start[rows, j].any():
        values = res.usual[rows, j] - nan_reduce(np.nanmedian, res.usual[rows], axis=1)
    else:
        values = np.fmax.reduce([res.drifts[name].excess[rows, j] for name in PACE])
    return float(np.nanmedian(values)) if np.isfinite(values).any() else 0.0


def gpu_cause(res: StragglerResult, j: int, rows: np.ndarray | None = None) -> tuple[str, dict]:
    """Why GPU ``j`` is a straggler, judged over ``rows`` (default: every sample it is flagged in): its
    hardware (``cause.judge``), else its host where its views of pace disagree (``views.cause``)."""
    rows = res.flagged[:, j] if rows is None else rows
    found, why = cause.judge(res.hardware, rows, j, pace_gap(res, rows, j), TRANSIENT)
    if not rows.any():
        return found, why
    seen = views.judge(res, rows, j)
    found = views.cause(found, seen)
    return found, {**why, "pace_signals": seen, **({"host": views.HOST_WHY} if found == HOST else {})}


def node_cause(res: StragglerResult, mask: np.ndarray, rows: np.ndarray) -> tuple[str, dict]:
    """Why a node runs slow: its slow GPUs' causes, combined (``cause.combined``)."""
    judged = {int(j): gpu_cause(res, int(j), rows) for j in np.flatnonzero(mask)}
    found = cause.combined([c for c, _ in judged.values()], TRANSIENT)
    return found, {"gpus": {str(j): c for j, (c, _) in judged.items()}}


def action(node: str, gpu: str | None, found: str) -> str | None:
    """What a hardware finding asks of the operator (the quarantine receiver acts on its alert)."""
    if found != HARDWARE:
        return None
    return f"drain {node}" + (f", GPU {gpu}" if gpu is not None else "")


def gpu_evidence(res: StragglerResult, i: int, j: int) -> dict:
    """The signals that agreed at sample ``i`` for GPU column ``j``, each against its reference."""
    signals = {name: evidence.signal(d, res.bars[name], i, j) for name, d in res.drifts.items() if res.hits[name][i, j]}
    out = {"votes": int(res.votes[i, j]), "signals": signals}
    held = [reason for reason, votes in res.reasons.items() if votes[i, j]]
    if held:
        out["clock_event_reasons"] = held
    if res.hits["wait"][i, j]:
        out["transmit_wait_above_peers"] = True
    if res.since_start[i, j]:        # slow since it started: its usual pace against the job median
        out["usual_vs_median"] = evidence.rounded(np.exp(res.usual[i, j] - np.nanmedian(res.usual[i])))
    return out


def node_evidence(res: StragglerResult, mask: np.ndarray, i: int) -> dict:
    """How many of the node's GPUs ran slow at sample ``i``, and the pace signal of its median one."""
    slow = res.hits["work"][i, mask] | res.hits["step"][i, mask]
    cols = np.flatnonzero(mask)
    name = "step" if np.isfinite(res.drifts["step"].excess[i, cols]).any() else "work"
    excess = np.nan_to_num(res.drifts[name].excess[i, cols], nan=-np.inf)
    middle = cols[np.argsort(excess)[len(cols) // 2]]
    return {"gpus_slow": int(slow.sum()), "gpus": int(mask.sum()),
            "signals": {name: evidence.signal(res.drifts[name], res.bars[name], i, middle)}}


def detections(features: Features, job_id: str, res: StragglerResult, start: float) -> list[dict]:
    """``{job_id, node, gpu, first_detected_s, score, evidence}`` per flagged GPU/node (contract rows
    plus evidence); the score is the worst performance while flagged."""
    cols = features.columns[features.job_slice(job_id)]
    out = []
    for j in np.flatnonzero(res.flagged.any(axis=0)):
        i = int(np.argmax(res.flagged[:, j]))
        _, node, gpu = cols[j]
        found, why = gpu_cause(res, j)
        seen = why.pop("pace_signals")      # which views agreed: a finding's evidence, beside its cause's
        out.append({"job_id": job_id, "node": node, "gpu": gpu, "first_detected_s": float(features.times[i] - start),
                    "score": float(performance(np.max(res.scores[res.flagged[:, j], j]))),
                    "evidence": {**gpu_evidence(res, i, j), "pace_signals": seen, "cause": why}, "cause": found,
                    "since_start": bool(res.since_start[:, j].any()), "action": action(node, gpu, found)})
    nodes = np.asarray(cols.get_level_values("node"))
    for node, flags in res.node_flagged.items():
        if flags.any():
            i = int(np.argmax(flags))
            node_scores = np.median(res.scores[:, nodes == node], axis=1)
            found, why = node_cause(res, nodes == node, flags)
            out.append({"job_id": job_id, "node": node, "gpu": None, "first_detected_s": float(features.times[i] - start),
                        "score": float(performance(np.max(node_scores[flags]))),
                        "evidence": {**node_evidence(res, nodes == node, i), "cause": why}, "cause": found,
                        "since_start": False, "action": action(node, None, found)})
    return sorted(out, key=lambda d: d["first_detected_s"])
