"""Score results against a scenario's ground truth (simulator/FORMATS.md ``truth.json``).

Samples at ``t`` describe (t - P, t]. Stragglers: a truth straggler is detected when its GPU (or, for
a node-wide slowdown, its node) is flagged within ``LATENCY_S`` of onset (one marked ``required:
false`` need not be); a run of flagged samples that overlaps no truth window of the same target
(plus ``GRACE_SAMPLES`` after its end) is a false flag. Stalls are compared second by second within each
sample: the seconds of truth stall of a cause that the scorer also calls stalled with that cause are correct.
Causes: each detected straggler's and each worker group GPU's against the truth's. Job-wide slowdowns:
one the truth requires is found when a reported one overlaps it with its cause within
``SLOWDOWN_LATENCY_S`` of its start, its GPU-seconds compared with the truth's; a reported one that
overlaps none of the truth's is a false one. The goodput ledger: each (kind, cause) against the truth's
within the loss account's tolerance, and its sum against the allocation. Checkpoints (truth ``checkpoints``):
each matched to the measured one that overlaps it, its duration and size errors relative to the truth's
(``CHECKPOINT_TOLERANCE``) and its target file system against the truth's; a measured one that overlaps none is
a false one.
Hung ranks (truth ``hangs``): named when the scorer names the rank's GPU as a culprit within ``LATENCY_S`` of the
hang; a run of culprit samples on a GPU that overlaps none of its hangs is a false finding.
"""
from __future__ import annotations

import numpy as np

from lockstep.analytics.scoring.score import JobResult

LATENCY_S = 60.0
GRACE_SAMPLES = 3     # a flag may outlast its slowdown by the pace signals' 15 s mean
LOSS_TOLERANCE = 0.10        # relative, per cause...
LOSS_FLOOR = 0.002           # ...or this share of the allocated GPU-seconds, for causes near zero
NOISY_TOLERANCE, NOISY_FLOOR = 0.2, 0.005    # the same, on scenarios with realistic noise (check_loss)
SLOWDOWN_LATENCY_S = 120.0   # a job-wide slowdown reported within two minutes of its start
CHECKPOINT_TOLERANCE = 0.10  # a checkpoint's duration and size, relative to the truth's


def _runs(flags: np.ndarray) -> list[tuple[int, int]]:
    edges = np.diff(np.concatenate([[0], flags.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)))


def flag_tracks(res: JobResult) -> dict[tuple[str, str | None], np.ndarray]:
    """(node, gpu) → flagged per sample; node-wide flags under (node, None)."""
    tracks = {(node, gpu): res.stragglers.flagged[:, j] for j, (_, node, gpu) in enumerate(res.columns)}
    tracks.update({(node, None): flags for node, flags in res.stragglers.node_flagged.items()})
    return tracks


def scorer_flags(res: JobResult) -> np.ndarray:
    """The scorer's per-GPU flags with each node-wide flag copied onto every GPU of its node."""
    flags = res.stragglers.flagged.copy()
    nodes = np.asarray(res.columns.get_level_values("node"))
    for node, node_flags in res.stragglers.node_flagged.items():
        flags[:, nodes == node] |= node_flags[:, None]
    return flags


def truth_windows(truth: dict, res: JobResult) -> list[list[dict]]:
    """Per GPU column, the truth straggler windows covering it (slow_node: every GPU of the node)."""
    out = []
    for _, node, gpu in res.columns:
        out.append([s for s in truth["stragglers"] if s["job_id"] == res.job_id and s["node"] == node
                    and s["gpu"] in (None, gpu)])
    return out


def compare(flags: np.ndarray, windows: list[list[dict]], rel: np.ndarray, period: float) -> dict:
    """GPU-level detections, false runs and latencies, and GPU-sample counts, of one flag matrix
    (times × GPUs, a node-wide flag or truth on every GPU of the node): what detectors other than the
    scorer's own tracks are measured with (bench/, analytics/models.py)."""
    out = {"truth": 0, "detected": 0, "false": 0, "latencies": [], "flagged_samples": int(flags.sum()),
           "truth_samples": 0, "hit_samples": 0}
    for j, wins in enumerate(windows):
        in_truth = np.zeros(len(rel), dtype=bool)
        for w in wins:
            hits = flags[:, j] & (rel >= w["start_s"]) & (rel <= w["end_s"] + period)
            latency = float(rel[np.argmax(hits)] - w.get("detect_from_s", w["start_s"])) if hits.any() else None
            in_truth |= (rel > w["start_s"]) & (rel - period < w["end_s"])
            if not w.get("required", True):
                continue
            out["truth"] += 1
            if latency is not None and latency <= LATENCY_S:
                out["detected"] += 1
                out["latencies"].append(latency)
        for a, b in _runs(flags[:, j]):
            if not any(rel[a] <= w["end_s"] + GRACE_SAMPLES * period and rel[b - 1] >= w["start_s"] for w in wins):
                out["false"] += 1
        out["truth_samples"] += int(in_truth.sum())
        out["hit_samples"] += int((in_truth & flags[:, j]).sum())
    return out


def check_stragglers(truth: dict, res: JobResult, start: float, period: float) -> dict:
    rel = res.times - start
    expected = [s for s in truth["stragglers"] if s["job_id"] == res.job_id]
    tracks = flag_tracks(res)
    found = []
    for s in expected:
        flags = tracks.get((s["node"], s["gpu"]), np.zeros(len(rel), bool))
        hits = flags & (rel >= s["start_s"]) & (rel <= s["end_s"] + period)
        latency = float(rel[np.argmax(hits)] - s.get("detect_from_s", s["start_s"])) if hits.any() else None
        # A slowdown below the bar of the contract (a transient rank slow for < 30 s, say) is in the
        # truth so that flagging it is no false flag, but missing it is no miss either.
        found.append({**s, "latency_s": latency, "detected": latency is not None and latency <= LATENCY_S,
                      "required": s.get("required", True)})
    false_flags = []
    for (node, gpu), flags in tracks.items():
        windows = [s for s in expected if (s["node"], s["gpu"]) == (node, gpu)]
        for a, b in _runs(flags):
            ok = any(rel[a] <= w["end_s"] + GRACE_SAMPLES * period and rel[b - 1] >= w["start_s"] for w in windows)
            if not ok:
                false_flags.append({"node": node, "gpu": gpu, "from_s": float(rel[a] - period), "to_s": float(rel[b - 1])})
    return {"expected": found, "false_flags": false_flags}


def truth_stall_seconds(truth: dict, job_id: str, rel: np.ndarray, period: float) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for s in truth["stalls"]:
        if s["job_id"] != job_id:
            continue
        overlap = np.clip(np.minimum(rel, s["end_s"]) - np.maximum(rel - period, s["start_s"]), 0.0, None)
        out[s["cause"]] = out.get(s["cause"], np.zeros(len(rel))) + overlap
    return out


def check_stalls(truth: dict, res: JobResult, start: float, period: float) -> dict:
    rel = res.times - start
    want = truth_stall_seconds(truth, res.job_id, rel, period)
    per_cause = {}
    for cause in sorted(set(want) | set(res.causes[res.causes != ""])):
        truth_s = want.get(cause, np.zeros(len(rel)))
        pred_s = np.where(res.causes == cause, res.stalled_s, 0.0)
        correct = np.minimum(truth_s, pred_s)
        first = np.flatnonzero((correct > 0))
        per_cause[cause] = {"truth_s": round(float(truth_s.sum()), 1), "predicted_s": round(float(pred_s.sum()), 1),
                            "correct_s": round(float(correct.sum()), 1),
                            "first_correct_s": float(rel[first[0]]) if len(first) else None}
    total = sum(c["truth_s"] for c in per_cause.values())
    right = sum(c["correct_s"] for c in per_cause.values())
    return {"per_cause": per_cause, "truth_s": total, "correct_s": right,
            "accuracy": round(right / total, 4) if total else None,
            "intervals": _interval_latencies(truth, res, rel, period)}


def _interval_latencies(truth: dict, res: JobResult, rel: np.ndarray, period: float) -> list[dict]:
    """Each truth stall with the delay until a sample overlapping it carried the right cause
    (the end of that sample: when the scorer could first say so); None if never."""
    out = []
    for s in truth["stalls"]:
        if s["job_id"] != res.job_id:
            continue
        hit = (res.causes == s["cause"]) & (rel > s["start_s"]) & (rel - period < s["end_s"])
        latency = float(rel[np.argmax(hit)] - s["start_s"]) if hit.any() else None
        out.append({"cause": s["cause"], "start_s": s["start_s"], "end_s": s["end_s"], "latency_s": latency})
    return out


def check_loss(truth: dict, res: JobResult) -> dict:
    """Per cause, scored against the truth within ``LOSS_TOLERANCE`` (or ``LOSS_FLOOR`` of the
    allocation). With realistic noise the truth is each sample's own counterfactual (the same
    jittered steps without the fault), which no scorer sees: it measures the job's progress against
    its clean level, whose sample-to-sample jitter is a few percent of it: there the tolerance is
    ``NOISY_TOLERANCE`` (or ``NOISY_FLOOR`` of the allocation)."""
    want = truth["loss"]
    allocated = float(want["allocated_gpu_seconds"])
    exact = truth.get("noise", "none") == "none"
    tolerance, floor = (LOSS_TOLERANCE, LOSS_FLOOR) if exact else (NOISY_TOLERANCE, NOISY_FLOOR)
    out = {}
    for cause, expected in want["lost_gpu_seconds"].items():
        got = res.loss["lost_gpu_seconds"].get(cause, 0.0)
        err = abs(got - expected)
        out[cause] = {"truth": round(expected, 1), "scored": got,
                      "relative_error": round(err / expected, 4) if expected else None,
                      "ok": err <= max(tolerance * expected, floor * allocated)}
    return out


def check_causes(truth: dict, res: JobResult) -> dict:
    """Per finding kind, the findings whose cause the truth knows: stragglers the truth requires that were
    flagged, and worker group GPUs reported as imbalance; ``right`` those with the truth's cause."""
    flagged = {(d["node"], d["gpu"]): d["cause"] for d in res.detections}
    ranks = {(r["node"], r["gpu"]): r["cause"] for r in res.imbalance["ranks"]}
    out = {}
    for kind, rows, found in (("straggler", [s for s in truth["stragglers"] if s["job_id"] == res.job_id
                                             and s.get("required", True)], flagged),
                              ("imbalance", [g for g in truth.get("imbalanced", []) if g["job_id"] == res.job_id],
                               ranks)):
        seen = [(r, found[(r["node"], r["gpu"])]) for r in rows if (r["node"], r["gpu"]) in found]
        wrong = [{"node": r["node"], "gpu": r["gpu"], "want": r["cause"], "got": got} for r, got in seen
                 if got != r["cause"]]
        out[kind] = {"total": len(seen), "right": len(seen) - len(wrong), "wrong": wrong}
    return out


def check_slowdowns(truth: dict, res: JobResult) -> dict:
    """Each truth slowdown with what was reported of it, and the reported ones that match none."""
    rows = [s for s in truth.get("slowdowns", []) if s["job_id"] == res.job_id]
    def overlaps(a, b):
        return a["start_s"] < b["end_s"] and b["start_s"] < a["end_s"]
    expected = []
    for want in rows:
        found = [d for d in res.slowdowns if overlaps(d, want)]
        right = [d for d in found if d["cause"] == want["cause"]]
        got = right[0] if right else (found[0] if found else None)
        latency = got["first_detected_s"] - want["start_s"] if got else None
        lost = sum(d["lost_gpu_seconds"] for d in right)
        expected.append({**want, "found_cause": got["cause"] if got else None, "latency_s": latency,
                         "detected": bool(right) and latency <= SLOWDOWN_LATENCY_S, "scored_gpu_seconds": round(lost, 1),
                         "relative_error": round(abs(lost - want["lost_gpu_seconds"]) / want["lost_gpu_seconds"], 4)
                         if right and want["lost_gpu_seconds"] else None})
    false = [d for d in res.slowdowns if not any(overlaps(d, w) for w in rows)]
    return {"expected": expected, "false": [{k: d[k] for k in ("start_s", "end_s", "cause")} for d in false]}


def check_checkpoints(truth: dict, res: JobResult) -> dict:
    """Each truth checkpoint with the one measured over it (duration and size errors), and the measured ones
    that overlap none."""
    rows = [c for c in truth.get("checkpoints", []) if c["job_id"] == res.job_id]
    def overlaps(got, want):
        return got["start_s"] < want["start_s"] + want["duration_s"] and want["start_s"] < got["end_s"]
    expected = []
    for want in rows:
        got = next((c for c in res.checkpoints if overlaps(c, want)), None)
        duration = abs(got["duration_s"] - want["duration_s"]) / want["duration_s"] if got else None
        size = abs(got["bytes"] - want["bytes"]) / want["bytes"] if got else None
        expected.append({**want, "found": got is not None, "duration_error": duration, "size_error": size,
                         "target_right": got is not None and (got.get("mount"), got.get("fstype")) == (
                             want.get("mount"), want.get("fstype")),
                         "within_tolerance": got is not None and max(duration, size) <= CHECKPOINT_TOLERANCE})
    false = [c for c in res.checkpoints if not any(overlaps(c, w) for w in rows)]
    return {"expected": expected, "false": false}


def check_ledger(truth: dict, res: JobResult) -> dict:
    """Each (kind, cause) of the ledger against the truth's (``check_loss``'s tolerance on noisy
    scenarios), and how far its sum is from the allocation."""
    want = truth.get("ledger")
    if not want or res.ledger_account is None:
        return {}
    got, allocated = res.ledger_account["gpu_seconds"], float(want["allocated_gpu_seconds"])
    exact = truth.get("noise", "none") == "none"
    tolerance, floor = (LOSS_TOLERANCE, LOSS_FLOOR) if exact else (NOISY_TOLERANCE, NOISY_FLOOR)
    entries = {}
    for kind, by_cause in want["gpu_seconds"].items():
        for cause, expected in by_cause.items():
            scored = float(got.get(kind, {}).get(cause, 0.0))
            entries[f"{kind}/{cause}" if cause else kind] = {
                "truth": round(expected, 1), "scored": round(scored, 1), "error": round(scored - expected, 1),
                "ok": abs(scored - expected) <= max(tolerance * expected, floor * allocated)}
    total = sum(v for by_cause in got.values() for v in by_cause.values())
    return {"entries": entries, "allocated": res.ledger_account["allocated_gpu_seconds"],
            "sum_error": abs(total - res.ledger_account["allocated_gpu_seconds"])}


def false_findings(truth: dict, res: JobResult, stragglers: dict, slowdowns: dict) -> dict:
    """Findings with nothing behind them in the truth: straggler flag runs, job-wide slowdowns, and
    hardware findings (a straggler judged hardware where the truth has no hardware fault on it, an
    imbalanced GPU whose hardware hints at more where the truth has none)."""
    hardware = {(s["node"], s["gpu"]) for s in truth["stragglers"] if s["job_id"] == res.job_id
                and s.get("cause") == "hardware"}
    wrong_hw = [d for d in res.detections if d["cause"] == "hardware" and (d["node"], d["gpu"]) not in hardware]
    hinted = [r for r in res.imbalance["ranks"] if r["cause"] != "work" and (r["node"], r["gpu"]) not in hardware]
    return {"stragglers": len(stragglers["false_flags"]), "slowdowns": len(slowdowns["false"]),
            "hardware": len(wrong_hw) + len(hinted)}


def check_hangs(truth: dict, res: JobResult, start: float, period: float) -> dict:
    """Each truth hang with the latency to the first sample naming its GPU (``named``: within ``LATENCY_S``),
    whether that sample's cause and the rank reported are the truth's; and the false findings."""
    rel = res.times - start
    flags = res.culprits if res.culprits is not None else np.zeros((len(rel), len(res.columns)), bool)
    column = {(node, gpu): j for j, (_, node, gpu) in enumerate(res.columns)}
    ranks = {(h["node"], h["gpu"]): h["rank"] for h in res.hangs}
    expected = [h for h in truth.get("hangs", []) if h["job_id"] == res.job_id]
    found = []
    for h in expected:
        j = column.get((h["node"], h["gpu"]))
        hit = flags[:, j] & (rel > h["start_s"]) & (rel - period < h["end_s"]) if j is not None else rel < 0
        first = int(np.argmax(hit)) if hit.any() else None
        latency = float(rel[first] - h["start_s"]) if first is not None else None
        found.append({**h, "latency_s": latency, "named": latency is not None and latency <= LATENCY_S,
                      "cause_right": first is not None and res.causes[first] == h["cause"],
                      "rank_right": ranks.get((h["node"], h["gpu"])) == str(h["rank"])})
    false = []
    for (node, gpu), j in column.items():
        windows = [h for h in expected if (h["node"], h["gpu"]) == (node, gpu)]
        for a, b in _runs(flags[:, j]):
            if not any(rel[a] > w["start_s"] and rel[a] - period < w["end_s"] + GRACE_SAMPLES * period
                       for w in windows):
                false.append({"node": node, "gpu": gpu, "cause": str(res.causes[a]), "from_s": float(rel[a] - period),
                              "to_s": float(rel[b - 1])})
    return {"expected": found, "false_findings": false}


def check(truth: dict, results: dict[str, JobResult], start: float, period: float) -> dict:
    jobs = {}
    for job_id, res in results.items():
        jobs[job_id] = {"stragglers": check_stragglers(truth, res, start, period),
                        "stalls": check_stalls(truth, res, start, period),
                        "hangs": check_hangs(truth, res, start, period),
                        "causes": check_causes(truth, res), "slowdowns": check_slowdowns(truth, res),
                        "checkpoints": check_checkpoints(truth, res)}
        jobs[job_id]["false_findings"] = false_findings(truth, res, jobs[job_id]["stragglers"], jobs[job_id]["slowdowns"])
        if truth["loss"]["job_id"] == job_id:
            jobs[job_id]["loss"] = check_loss(truth, res)
            jobs[job_id]["ledger"] = check_ledger(truth, res)
    return jobs
