"""IsolationForest as a secondary straggler signal (the issue's "where a model genuinely helps"),
measured against the simulator's truth on every scenario in simulator/scenarios/.

Each scenario goes through the evaluation's own path (``lockstep.analytics.evaluation.evaluate.simulate``, then
``build_features`` + ``score_features``, which is ``score_frame``), and four detectors are compared
per GPU track (a node-wide flag or a slow_node truth counts for every GPU of the node):

  scorer   the straggler scorer's flags (``flagged`` | ``node_flagged``)
  iforest  an IsolationForest per job window over the per-GPU, per-sample vectors the scorer already
           builds (``straggler.signal_votes``: each pace signal's change against the GPU's usual
           standing among its peers, the reason vote, and the log transmit-wait excess), fitted
           and scored on the samples the scorer scores (no stall of another cause), then given the
           scorer's persistence (``PERSIST_S``)
  and      scorer AND iforest          or   scorer OR iforest

Contamination: the scorer's premise is that a straggler is one rank among its peers, so the default
is 1 / (GPUs in the job): a budget of one outlying GPU per sample, from the job's shape, never from
the truth. ``--contamination auto`` uses the paper's score offset instead. The totals are also
printed for auto, 0.01, 0.05 and 0.1 (same forests: contamination only moves the threshold).
random_state is fixed, so everything but the CPU figures repeats exactly.

GPU level, as analytics.harness / truthcheck count it: a truth (GPU, window) is detected when its
track is flagged within LATENCY_S of onset; a flag run that overlaps no truth window of its GPU
(plus GRACE_SAMPLES) is a false flag; precision = detected / (detected + false runs). Sample
precision/recall count flagged GPU-samples against the truth windows. CPU cost is process time
(all threads) of the IsolationForest fit + score, next to the scoring pass it would join.

Every scenario runs in full (12 scenarios, ~15 s on 2 cores): no subsetting was needed. The bench
has no budget and exits 0; it reports and prints a verdict.

Usage: bench/bench_isolation_forest.py [--contamination FRACTION|auto] [SCENARIO ...]
(SCENARIO: names or substrings of names in simulator/scenarios/; default all)
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lockstep.analytics.evaluation.evaluate import simulate  # noqa: E402
from lockstep.analytics.evaluation.simframe import build_features  # noqa: E402
from lockstep.analytics.evaluation.truthcheck import compare, scorer_flags, truth_windows  # noqa: E402
from lockstep.analytics.scoring import straggler  # noqa: E402
from lockstep.analytics.scoring.score import JobResult, score_features  # noqa: E402

SCENARIOS = ROOT / "simulator" / "scenarios"
METHODS = ("scorer", "iforest", "and", "or")
RANDOM_STATE = 0
N_ESTIMATORS = 100
SWEEP = (None, "auto", 0.01, 0.05, 0.1)     # None: 1 / GPUs in the job


def feature_vectors(features, res: JobResult) -> np.ndarray:
    """(times × GPUs) × 6 matrix of the scorer's per-GPU signal strengths, slow direction only: each
    pace signal's change against the GPU's usual standing (``straggler.StragglerResult.drifts``),
    the throttling-reason vote, and the log transmit-wait excess over the peers' median."""
    s = res.stragglers
    sig = {name: m[:, features.job_slice(res.job_id)] for name, m in features.signals.items()}
    wait = np.log1p(np.nan_to_num(sig["xmit_wait"]))
    wait_excess = np.clip(wait - np.median(wait, axis=1, keepdims=True), 0.0, None)
    planes = [np.clip(np.nan_to_num(s.drifts[k].excess), 0.0, None) for k in ("work", "clock", "tx", "step")]
    return np.stack(planes + [s.hits["reason"].astype(float), wait_excess], axis=-1)


def outlier_scores(vectors: np.ndarray, active: np.ndarray) -> tuple[np.ndarray, float]:
    """IsolationForest scores (lower = more abnormal; NaN where the scorer does not score) per
    (sample, GPU), fitted on the job window's active rows, and the CPU seconds of fit + score."""
    from sklearn.ensemble import IsolationForest

    t, g, _ = vectors.shape
    rows = np.repeat(active, g)
    scores = np.full(t * g, np.nan)
    cpu0 = time.process_time()
    if rows.sum() >= 2:
        x = vectors.reshape(t * g, -1)[rows]
        model = IsolationForest(n_estimators=N_ESTIMATORS, contamination="auto", random_state=RANDOM_STATE)
        scores[rows] = model.fit(x).score_samples(x)
    return scores.reshape(t, g), time.process_time() - cpu0


def iforest_flags(scores: np.ndarray, contamination, samples: int) -> np.ndarray:
    """``predict() == -1`` for that contamination, with the scorer's persistence. The trees do not
    depend on contamination: sklearn's fit only sets ``offset_`` from it (-0.5 for "auto", else that
    percentile of the training scores), so one fit serves every contamination."""
    active = np.isfinite(scores)
    if not active.any():
        return np.zeros(scores.shape, dtype=bool)
    offset = -0.5 if contamination == "auto" else np.percentile(scores[active], 100.0 * contamination)
    return straggler.persistent(active & (np.where(active, scores, 0.0) < offset), samples)


def job_contamination(contamination, gpus: int):
    """None: one outlying GPU per sample (1 / GPUs in the job); sklearn allows at most 0.5."""
    if contamination == "auto":
        return "auto"
    return min(0.5, contamination if contamination is not None else 1.0 / gpus)


def measure(path: Path, contaminations: list) -> dict:
    """Per contamination, the four detectors' counts on one scenario; CPU of the forest and of the
    scoring pass (``build_features`` + ``score_features``, i.e. ``score_frame``)."""
    run = simulate(path)
    cpu0 = time.process_time()
    features = build_features(run.frame)
    results = score_features(features, run.start, run.period)
    score_cpu = time.process_time() - cpu0
    samples = max(1, int(round(straggler.PERSIST_S / run.period)))
    parts: dict = {c: {m: [] for m in METHODS} for c in contaminations}
    if_cpu = 0.0
    for res in results.values():
        active = (res.causes == "") | (res.causes == "straggler")
        scores, cpu = outlier_scores(feature_vectors(features, res), active)
        if_cpu += cpu
        scorer = scorer_flags(res)
        windows = truth_windows(run.truth, res)
        rel = res.times - run.start
        for c in contaminations:
            forest = iforest_flags(scores, job_contamination(c, len(res.columns)), samples)
            tracks = {"scorer": scorer, "iforest": forest, "and": scorer & forest, "or": scorer | forest}
            for m, flags in tracks.items():
                parts[c][m].append(compare(flags, windows, rel, run.period))
    return {"scenario": run.scenario, "if_cpu_s": if_cpu, "score_cpu_s": score_cpu,
            "methods": {c: {m: _merge(p) for m, p in per.items()} for c, per in parts.items()}}


def _merge(parts: list[dict]) -> dict:
    out = {k: [] if k == "latencies" else 0 for k in parts[0]}
    for p in parts:
        for k, v in p.items():
            out[k] = out[k] + v
    return out


def stats(c: dict) -> dict:
    flagged = c["detected"] + c["false"]
    return {"precision": c["detected"] / flagged if flagged else None,
            "recall": c["detected"] / c["truth"] if c["truth"] else None,
            "sample_precision": c["hit_samples"] / c["flagged_samples"] if c["flagged_samples"] else None,
            "sample_recall": c["hit_samples"] / c["truth_samples"] if c["truth_samples"] else None,
            "latency_med": float(np.median(c["latencies"])) if c["latencies"] else None,
            "latency_max": max(c["latencies"]) if c["latencies"] else None}


def _f(v) -> str:
    return "-" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)


def _label(c) -> str:
    return "1/GPUs" if c is None else str(c)


HEADER = (f"{'scenario':<22}{'method':<9}{'truth':>6}{'det':>5}{'false':>6}{'P':>6}{'R':>6}{'latency med/max':>17}"
          f"{'sample P':>9}{'sample R':>9}")


def row(name: str, method: str, c: dict) -> str:
    s = stats(c)
    lat = f"{_f(s['latency_med'])}/{_f(s['latency_max'])}"
    return (f"{name:<22}{method:<9}{c['truth']:>6}{c['detected']:>5}{c['false']:>6}{_f(s['precision']):>6}"
            f"{_f(s['recall']):>6}{lat:>17}{_f(s['sample_precision']):>9}{_f(s['sample_recall']):>9}")


def f1(c: dict) -> float:
    s = stats(c)
    p, r = s["precision"] or 0.0, s["recall"] or 0.0
    return 2 * p * r / (p + r) if p + r else 0.0


def helps(total: dict[str, dict]) -> list[str]:
    """Combinations that beat the scorer: a higher GPU-level F1, or the same F1 sooner (median latency)."""
    base = total["scorer"]

    def sooner(c: dict) -> bool:
        return bool(c["latencies"] and base["latencies"] and np.median(c["latencies"]) < np.median(base["latencies"]))
    return [m for m in ("and", "or") if f1(total[m]) > f1(base) + 1e-9
            or (f1(total[m]) > f1(base) - 1e-9 and sooner(total[m]))]


def verdict(totals: dict, primary, if_cpu: float, score_cpu: float) -> str:
    total = totals[primary]
    figures = "; ".join(f"{m} P {_f(stats(total[m])['precision'])} R {_f(stats(total[m])['recall'])} "
                        f"false {total[m]['false']}" for m in METHODS)
    others = [f"{m} at {_label(c)}" for c, t in totals.items() if c != primary for m in helps(t)]
    cost = f"IsolationForest {if_cpu:.2f} s CPU vs scoring pass {score_cpu:.2f} s"
    better = helps(total)
    if better:
        return f"secondary signal helps ({', '.join(better)} beats the scorer at {_label(primary)}): {figures}; {cost}"
    sweep = f"only {', '.join(others)} would" if others else "nor at any other contamination tried"
    return f"secondary signal does not help: no combination beats the scorer alone at {_label(primary)} " \
           f"({figures}), {sweep}; {cost}"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--contamination", default=None,
                    help="IsolationForest contamination: a fraction, or auto (default 1 / GPUs in the job)")
    ap.add_argument("scenario", nargs="*", help="scenario names or substrings (default: all)")
    args = ap.parse_args(argv)
    try:
        primary = args.contamination if args.contamination in (None, "auto") else float(args.contamination)
    except ValueError:
        ap.error(f"--contamination {args.contamination}: give a fraction or auto")
    sweep = [primary] + [c for c in SWEEP if c != primary]
    paths = [p for p in sorted(SCENARIOS.glob("*.y*ml")) if not args.scenario or any(s in p.stem for s in args.scenario)]
    if not paths:
        ap.error(f"no scenario in {SCENARIOS.relative_to(ROOT)} matches {' '.join(args.scenario)}")
    print(f"contamination {_label(primary)}")
    print(HEADER)
    measured = []
    for path in paths:
        r = measure(path, sweep)
        measured.append(r)
        for m in METHODS:
            print(row(r["scenario"], m, r["methods"][primary][m]))
    totals = {c: {m: _merge([r["methods"][c][m] for r in measured]) for m in METHODS} for c in sweep}
    for m in METHODS:
        print(row(f"TOTAL ({len(measured)})", m, totals[primary][m]))
    print(f"\nother contaminations, totals (same fitted forests)\n{HEADER}")
    for c in sweep[1:]:
        for m in METHODS[1:]:
            print(row(f"TOTAL at {_label(c)}", m, totals[c][m]))
    if_cpu = sum(r["if_cpu_s"] for r in measured)
    score_cpu = sum(r["score_cpu_s"] for r in measured)
    print(f"\nrandom_state {RANDOM_STATE}, {N_ESTIMATORS} trees; truth/det/false: GPU windows and false flag runs; "
          f"latency s after onset (persistence alone is {straggler.PERSIST_S:.0f} s)")
    print("CPU ms per scenario, IsolationForest fit+score / scoring pass: " + ", ".join(
        f"{r['scenario']} {1000 * r['if_cpu_s']:.0f}/{1000 * r['score_cpu_s']:.0f}" for r in measured))
    print(verdict(totals, primary, if_cpu, score_cpu))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
