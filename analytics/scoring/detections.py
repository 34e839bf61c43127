"""First flag of each GPU or node, with the evidence at that moment (evaluation report rows)."""
from __future__ import annotations

import numpy as np

from lockstep.analytics.frame.features import Features
from lockstep.analytics.scoring import evidence
from lockstep.analytics.scoring.straggler import StragglerResult, performance


def gpu_evidence(res: StragglerResult, i: int, j: int) -> dict:
    """The signals that agreed at sample ``i`` for GPU column ``j``, each against its reference."""
    signals = {name: evidence.signal(d, res.bars[name], i, j) for name, d in res.drifts.items() if res.hits[name][i, j]}
    out = {"votes": int(res.votes[i, j]), "signals": signals}
    held = [reason for reason, votes in res.reasons.items() if votes[i, j]]
    if held:
        out["clock_event_reasons"] = held
    if res.hits["wait"][i, j]:
        out["transmit_wait_above_peers"] = True
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
        out.append({"job_id": job_id, "node": node, "gpu": gpu, "first_detected_s": float(features.times[i] - start),
                    "score": float(performance(np.max(res.scores[res.flagged[:, j], j]))),
                    "evidence": gpu_evidence(res, i, j)})
    nodes = np.asarray(cols.get_level_values("node"))
    for node, flags in res.node_flagged.items():
        if flags.any():
            i = int(np.argmax(flags))
            node_scores = np.median(res.scores[:, nodes == node], axis=1)
            out.append({"job_id": job_id, "node": node, "gpu": None, "first_detected_s": float(features.times[i] - start),
                        "score": float(performance(np.max(node_scores[flags]))),
                        "evidence": node_evidence(res, nodes == node, i)})
    return sorted(out, key=lambda d: d["first_detected_s"])
