"""scikit-learn models weighed against the scorers' simple rules (``make eval`` prints the comparison).

- Straggler spread: a robust covariance (``MinCovDet``) of each GPU-sample's changes in compute
  activity, step time and clock, with a flag where the robust Mahalanobis distance is beyond the
  chi-square tail, against the rule (each signal against ``K`` of its own MAD spread, two agreeing).
  The covariance knows that activity and step time move together; the rule counts them as two votes.
- Worker groups: the Gaussian mixture ``lockstep.analytics.scoring.imbalance`` uses to decide which GPUs are off the
  main group, against the rule it replaced (at least ``imbalance.FLOOR`` off the median).

Both see exactly what the scorer saw (``JobResult``); the comparison counts against the truth as
``lockstep.analytics.evaluation.truthcheck`` does. Fitted with a fixed ``random_state``: the figures repeat.
"""
from __future__ import annotations

import numpy as np

from lockstep.analytics.scoring import imbalance
from lockstep.analytics.scoring.score import JobResult
from lockstep.analytics.scoring.straggler import PERSIST_S, not_faster, persistent

RANDOM_STATE = 0
FIT_ROWS = 20_000        # GPU-samples the robust covariance is fitted on (a seeded subsample)
TAIL = 1e-7              # chi-square tail beyond which a GPU-sample is an outlier
SIGNALS = ("work", "step", "clock")


def mcd_flags(res: JobResult, period: float) -> np.ndarray:
    """times × GPUs: flagged where the robust distance of the slow-direction changes is in the tail
    for ``PERSIST_S`` (the rule's persistence)."""
    from scipy.stats import chi2
    from sklearn.covariance import MinCovDet

    s = res.stragglers
    planes = [s.drifts[name].excess for name in SIGNALS if np.isfinite(s.drifts[name].excess).any()]
    x = np.stack(planes, axis=-1)
    t, g, k = x.shape
    rows = np.isfinite(x).all(axis=-1).reshape(-1)
    flat = x.reshape(-1, k)
    if rows.sum() <= 10 * k:
        return np.zeros((t, g), dtype=bool)
    rng = np.random.default_rng(RANDOM_STATE)
    fit = flat[rows][rng.permutation(int(rows.sum()))[:FIT_ROWS]]
    model = MinCovDet(random_state=RANDOM_STATE).fit(fit)
    dist = np.full(t * g, 0.0)
    dist[rows] = model.mahalanobis(flat[rows])
    slower = np.nansum(np.clip(flat - model.location_, 0, None), axis=1) > 0
    out = (dist >= chi2.isf(TAIL, k)) & slower
    candidate = out.reshape(t, g) & not_faster(s.drifts) & (res.causes == "")[:, None]
    return persistent(candidate, max(1, round(PERSIST_S / period)))


def _members(found: np.ndarray, res: JobResult) -> set[tuple[str, str]]:
    return {(node, gpu) for (_, node, gpu), hit in zip(res.columns, found) if hit}


def weigh(truth: dict, results: dict[str, JobResult], start: float, period: float) -> dict:
    """Per detector, counts against the truth: straggler windows detected / false flag runs (rule vs
    robust covariance), and GPUs rightly / wrongly / not reported as imbalanced (rule vs mixture)."""
    from lockstep.analytics.evaluation.truthcheck import compare, scorer_flags, truth_windows

    out = {"stragglers": {"rule": [], "mcd": []}, "imbalance": {"rule": [0, 0, 0], "gmm": [0, 0, 0]}}
    for res in results.values():
        windows, rel = truth_windows(truth, res), res.times - start
        out["stragglers"]["rule"].append(compare(scorer_flags(res), windows, rel, period))
        out["stragglers"]["mcd"].append(compare(mcd_flags(res, period), windows, rel, period))
        want = {(g["node"], g["gpu"]) for g in truth.get("imbalanced", []) if g["job_id"] == res.job_id}
        learned = res.stragglers.drifts["work"].learned      # what the scorer's imbalance rests on
        broken = res.stragglers.since_start.any(axis=0)       # hardware stragglers since the start: not imbalance
        for name, found in (("rule", imbalance.involved_by_rule(learned) & ~broken),
                            ("gmm", imbalance.involved(learned) & ~broken)):
            got = _members(found, res)
            counts = out["imbalance"][name]
            counts[0] += len(got & want)
            counts[1] += len(got - want)
            counts[2] += len(want - got)
    return out


def summarize_models(parts: list[dict]) -> dict:
    """Totals over scenarios: per straggler detector precision, recall, false runs; per imbalance
    method precision and recall over GPUs."""
    out: dict = {"stragglers": {}, "imbalance": {}}
    for name in ("rule", "mcd"):
        rows = [c for p in parts for c in p["stragglers"][name]]
        truth, hit, false = (sum(c[k] for c in rows) for k in ("truth", "detected", "false"))
        out["stragglers"][name] = {"recall": _ratio(hit, truth), "precision": _ratio(hit, hit + false),
                                   "false_flags": false, "windows": truth}
    for name in ("rule", "gmm"):
        tp, fp, fn = (sum(p["imbalance"][name][i] for p in parts) for i in range(3))
        out["imbalance"][name] = {"recall": _ratio(tp, tp + fn), "precision": _ratio(tp, tp + fp), "gpus": tp + fn}
    return out


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 3) if b else None


def format_models(summary: dict) -> list[str]:
    """The comparison and its verdict: a model is kept out unless it beats the rule."""
    st, imb = summary["stragglers"], summary["imbalance"]
    f = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    lines = ["scikit-learn models against the simple rules (same scored results):",
             *(f"  stragglers {n:<5} recall {f(r['recall'])} precision {f(r['precision'])} false runs {r['false_flags']}"
               for n, r in st.items()),
             *(f"  imbalance  {n:<5} recall {f(r['recall'])} precision {f(r['precision'])} over {r['gpus']} truth GPUs"
               for n, r in imb.items())]
    for kind, model, label, used in (("stragglers", "mcd", "robust covariance (MinCovDet)", False),
                                     ("imbalance", "gmm", "Gaussian mixture for worker groups", True)):
        a, b = summary[kind]["rule"], summary[kind][model]
        verdict = ("gains over the rule" if _f1(b) > _f1(a) + 1e-9 else "gains nothing over the rule") + \
            (": the scorer uses it" if used else ": the scorer keeps the rule")
        lines.append(f"  {label}: {verdict} (F1 {_f1(b):.3f} vs {_f1(a):.3f})")
    return lines


def _f1(r: dict) -> float:
    p, rc = r["precision"] or 0.0, r["recall"] or 0.0
    return 2 * p * rc / (p + rc) if p + rc else 0.0
