"""``lockstep analytics evaluate-fleet``: the peer-relative health on a simulated fleet, graded.

Every refresh (``REFRESH_S``) the features of each GPU over the window before it are computed as the
service's queries compute them in Prometheus (``lockstep.analytics.frame.peers``: the median of each
feature over the samples at load), scored against the GPU's peers (``lockstep.analytics.scoring.peers``)
and turned into verdicts. The report: for each planted GPU, when it became ``degraded`` counted from
its first loaded sample, and whether the evidence names the right feature; false verdicts per 1,000
GPU-days on the healthy GPUs; and, with ``models``, the same counts for scikit-learn detectors on the
same deviations and the same persistence (``compare``).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from lockstep.analytics.frame.peers import LOADED_UTILIZATION, MIN_LOADED_SAMPLES, POWER_CAPPED, WINDOW_S
from lockstep.analytics.scoring import peers
from lockstep.analytics.scoring.nanstats import nan_reduce

REFRESH_S = 300.0
EXPECTED = {"slow": "sm_clock", "hot": "thermal", "downtrained": "pcie"}
LATENCY_BUDGET_S = 1800.0
RANDOM_STATE = 0


def sample_features(s) -> dict[str, np.ndarray]:
    """times × GPUs per feature, NaN where the GPU is not loaded (what the queries' ``and`` keeps)."""
    loaded = s.utilization >= LOADED_UTILIZATION
    with np.errstate(divide="ignore", invalid="ignore"):
        raw = {"sm_clock": s.sm_clock / s.sm_clock_max,
               "power": (s.power / s.power_limit) / s.sm_active,
               peers.TEMPERATURE: s.temperature, peers.POWER_W: s.power,
               "pcie": (s.pcie_width / s.pcie_width_max) * 2.0 ** (s.pcie_gen - s.pcie_gen_max)}
    out = {k: np.where(loaded, v, np.nan) for k, v in raw.items()}
    out["sm_clock"] = np.where(s.power / s.power_limit < POWER_CAPPED, out["sm_clock"], np.nan)
    return out


@dataclass(frozen=True)
class Windows:
    ends: np.ndarray                      # seconds from the start
    deviations: list[pd.DataFrame]        # one per refresh: GPUs × features, robust units


def window_features(s, end: float, feats: dict[str, np.ndarray] | None = None,
                    gpus: pd.MultiIndex | None = None) -> pd.DataFrame:
    """Each GPU's model, driver and features over the window ending at ``end`` (seconds from the start):
    the median of the loaded samples in ``(end - WINDOW_S, end]``, NaN with fewer than ``MIN_LOADED_SAMPLES``.
    ``feats`` and ``gpus`` (``gpu_index``): the fleet's, computed once for all its windows."""
    feats = feats if feats is not None else sample_features(s)
    period = float(s.times[1] - s.times[0])
    hi = int(end // period) + 1
    lo = max(0, hi - int(WINDOW_S // period))
    frame = pd.DataFrame({"model": s.model, "driver": s.driver}, index=gpus if gpus is not None else gpu_index(s))
    for name, x in feats.items():
        block = x[lo:hi]
        enough = np.isfinite(block).sum(axis=0) >= MIN_LOADED_SAMPLES
        frame[name] = np.where(enough, nan_reduce(np.nanmedian, block, axis=0), np.nan)   # an idle GPU: no value
    return frame


def gpu_index(s) -> pd.MultiIndex:
    """The fleet's GPUs as a ``(node, gpu)`` index."""
    return pd.MultiIndex.from_tuples(s.gpus, names=["node", "gpu"])


def windows(s) -> Windows:
    feats, gpus = sample_features(s), gpu_index(s)
    ends = np.arange(REFRESH_S, s.times[-1] + 1, REFRESH_S)
    return Windows(ends, [peers.deviations(window_features(s, float(end), feats, gpus)) for end in ends])


def rule_scores(w: Windows) -> list[pd.Series]:
    return [peers.scores(d) for d in w.deviations]


def grade(s, w: Windows, score_list: list[pd.Series], threshold: float = peers.THRESHOLD) -> dict:
    """Verdicts over the refreshes (the persistence and hysteresis of ``peers.Verdicts``, with
    ``threshold`` on these scores), graded against the planted faults."""
    verdicts = peers.Verdicts()
    onsets: dict[tuple, list[float]] = {}
    first_evidence: dict[tuple, dict] = {}
    before: set = set()
    for end, score, dev in zip(w.ends, score_list, w.deviations):
        scaled = score * (peers.THRESHOLD / threshold)
        now = verdicts.update(scaled, float(end))
        for key in now - before:
            onsets.setdefault(key, []).append(float(end))
            first_evidence.setdefault(key, peers.evidence(dev.loc[[key]]).get(key, {}))
        before = now
    loaded = s.utilization >= LOADED_UTILIZATION
    planted, keys = [], set()
    for f in s.faults:
        key = (f.node, str(f.gpu))
        keys.add(key)
        col = s.gpus.index(key)
        load_start = float(s.times[np.argmax(loaded[:, col])]) if loaded[:, col].any() else None
        hit = onsets.get(key, [None])[0]
        # "within 30 minutes of load": time under load until the verdict (a short job, then an idle gap, does not count)
        period = float(s.times[1] - s.times[0])
        latency = None if hit is None or load_start is None else float(loaded[s.times <= hit, col].sum()) * period
        ev = first_evidence.get(key, {})
        planted.append({"node": f.node, "gpu": str(f.gpu), "kind": f.kind, "load_start_s": load_start,
                        "degraded_s": hit, "latency_s": latency, "evidence": ev,
                        "right_evidence": EXPECTED[f.kind] in ev,
                        "within_budget": bool(latency is not None and latency <= LATENCY_BUDGET_S)})
    healthy = len(s.gpus) - len(keys)
    days = float(s.times[-1] + (s.times[1] - s.times[0])) / 86400.0
    false = sum(len(v) for k, v in onsets.items() if k not in keys)
    return {"planted": planted, "healthy_gpus": healthy, "gpu_days": round(healthy * days, 1),
            "false_verdicts": false, "false_per_1000_gpu_days": round(1000.0 * false / (healthy * days), 3),
            "false_gpus": sorted(f"{k[0]}/{k[1]}" for k in onsets if k not in keys)}


def ok(g: dict) -> bool:
    return all(p["within_budget"] and p["right_evidence"] for p in g["planted"]) and g["false_verdicts"] == 0


def evaluate_fleet(path: str | Path, models: bool = False) -> dict:
    from lockstep.simulator.fleet import load_fleet, simulate_fleet

    sc = load_fleet(path)
    s = simulate_fleet(sc)
    w = windows(s)
    rep = {"scenario": sc.name, "gpus": len(s.gpus), "rule": grade(s, w, rule_scores(w))}
    if models:
        from lockstep.analytics.evaluation.fleetmodels import model_scores
        rep["models"] = {name: grade(s, w, sc_list, threshold) for name, (sc_list, threshold) in model_scores(w).items()}
        rep["kept"] = "rule" if all(_rank(rep["rule"]) >= _rank(m) for m in rep["models"].values()) else \
            max(rep["models"], key=lambda k: _rank(rep["models"][k]))
    return rep


def _rank(g: dict) -> tuple:
    """Better: more planted GPUs rightly degraded within budget, then fewer false verdicts."""
    return (sum(p["within_budget"] for p in g["planted"]), -g["false_verdicts"])


def format_fleet(rep: dict) -> str:
    lines = [f"fleet scenario {rep['scenario']}: {rep['gpus']} GPUs"]
    for name, g in [("rule (median/MAD)", rep["rule"])] + [(k, v) for k, v in rep.get("models", {}).items()]:
        found = sum(p["within_budget"] and p["right_evidence"] for p in g["planted"])
        lat = [p["latency_s"] for p in g["planted"] if p["latency_s"] is not None]
        worst = f"{max(lat) / 60:.0f} min" if lat else "-"
        lines.append(f"  {name:<22} planted degraded with right evidence within 30 min: {found}/{len(g['planted'])}, "
                     f"worst latency {worst}; false verdicts {g['false_verdicts']} "
                     f"({g['false_per_1000_gpu_days']:.2f} per 1,000 GPU-days over {g['gpu_days']:.0f})")
    for p in rep["rule"]["planted"]:
        lat = "never" if p["latency_s"] is None else f"{p['latency_s'] / 60:.0f} min after load"
        ev = ", ".join(f"{k} {v:+.1f}" for k, v in p["evidence"].items()) or "-"
        lines.append(f"    {p['kind']:<12} {p['node']} gpu {p['gpu']}: degraded {lat}; evidence {ev}")
    if "kept" in rep:
        lines.append(f"  kept: {rep['kept']}")
    return "\n".join(lines)
