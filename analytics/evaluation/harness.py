"""``lockstep analytics evaluate --all DIR``: every scenario against its truth, summed per fault kind.

Per straggler kind of the truth (gpu_throttle, slow_node, transient, drift): recall (flagged with the
right GPU/node within 60 s, over the slowdowns the truth requires), precision (true flag runs over
all flag runs; false runs are charged to every kind of the scenario they occur in, or to ``none`` in
a fault-free one) and detection latency; over all scenarios, false straggler flags per 1,000
GPU-hours scored. Per stall cause: recall
(truth intervals that a sample overlapping them classified right), precision and cause accuracy in
stalled seconds, and the latency to the end of the first correctly classified sample. Loss: the share of
(scenario, cause) pairs within tolerance of the truth. Per rank hang kind (rank_stopped, rank_died,
peer_dead): the hangs whose rank was named within 60 s (node and GPU), with the right cause and rank, and the
latency; over all scenarios, false hang findings (a rank named outside any hang of it) per 1,000 GPU-hours.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from lockstep.analytics.evaluation import truthcheck
from lockstep.analytics.evaluation.evaluate import evaluate
from lockstep.analytics.evaluation.models import format_models, summarize_models, weigh

FLEET_DIR = "fleet"


def run_all(directory: str | Path, models: bool = False) -> list[dict]:
    """Every scenario of ``directory`` scored and checked; ``models``: also the scikit-learn
    alternatives of ``lockstep.analytics.evaluation.models``, measured on the same results."""
    rows = []
    for path in sorted(Path(directory).rglob("*.y*ml")):      # large/: the 1,024-GPU hour
        if FLEET_DIR in path.relative_to(directory).parts[:-1]:   # fleet scenarios: `evaluate-fleet`
            continue
        started = time.process_time()
        run, results, rep = evaluate(path)
        row = {"scenario": run.scenario, "file": str(path), "report": rep, "truth": run.truth,
               "check": truthcheck.check(run.truth, results, run.start, run.period),
               "cpu_s": round(time.process_time() - started, 2)}
        if models:
            row["models"] = weigh(run.truth, results, run.start, run.period)
        rows.append(row)
    return rows


def summarize(rows: list[dict]) -> dict:
    kinds: dict[str, dict] = {}
    causes: dict[str, dict] = {}
    hangs: dict[str, dict] = {}
    false_hangs = 0
    loss_ok = loss_total = 0
    gpu_hours = false_total = 0.0
    for row in rows:
        gpu_hours += row["truth"]["loss"]["allocated_gpu_seconds"] / 3600.0
        for job in row["check"].values():
            st = job["stragglers"]
            false_total += len(st["false_flags"])
            scenario_kinds = {s["kind"] for s in st["expected"]} or {"none"}
            for s in st["expected"]:
                k = kinds.setdefault(s["kind"], {"faults": 0, "detected": 0, "false_flags": 0, "latencies": []})
                if not s["required"]:
                    continue
                k["faults"] += 1
                k["detected"] += int(s["detected"])
                if s["latency_s"] is not None:
                    k["latencies"].append(s["latency_s"])
            for kind in scenario_kinds:
                k = kinds.setdefault(kind, {"faults": 0, "detected": 0, "false_flags": 0, "latencies": []})
                k["false_flags"] += len(st["false_flags"])
            for cause, c in job["stalls"]["per_cause"].items():
                agg = causes.setdefault(cause, {"intervals": 0, "found": 0, "truth_s": 0.0, "predicted_s": 0.0,
                                                "correct_s": 0.0, "latencies": []})
                for key in ("truth_s", "predicted_s", "correct_s"):
                    agg[key] += c[key]
            for interval in job["stalls"]["intervals"]:
                agg = causes[interval["cause"]]
                agg["intervals"] += 1
                if interval["latency_s"] is not None:
                    agg["found"] += 1
                    agg["latencies"].append(interval["latency_s"])
            for h in job["hangs"]["expected"]:
                k = hangs.setdefault(h["kind"], {"hangs": 0, "named": 0, "cause_right": 0, "rank_right": 0,
                                                 "latencies": []})
                k["hangs"] += 1
                for key in ("named", "cause_right", "rank_right"):
                    k[key] += int(h[key] and h["named"])
                if h["latency_s"] is not None:
                    k["latencies"].append(h["latency_s"])
            false_hangs += len(job["hangs"]["false_findings"])
            for c in job.get("loss", {}).values():
                loss_total += 1
                loss_ok += int(c["ok"])
    every = {"faults": sum(k["faults"] for k in kinds.values()), "detected": sum(k["detected"] for k in kinds.values()),
             "false_flags": int(false_total), "latencies": [x for k in kinds.values() for x in k["latencies"]]}
    return {"stragglers": {k: _straggler_row(v) for k, v in sorted(kinds.items())}, "straggler_overall": _straggler_row(every),
            "stalls": {c: _stall_row(v) for c, v in sorted(causes.items())},
            "loss_within_tolerance": f"{loss_ok}/{loss_total}",
            "gpu_hours": round(gpu_hours, 1), "false_straggler_flags": int(false_total),
            "false_flags_per_1000_gpu_hours": round(1000.0 * false_total / gpu_hours, 3) if gpu_hours else None,
            "hangs": {k: _hang_row(v) for k, v in sorted(hangs.items())}, "false_hang_findings": false_hangs,
            "false_hang_findings_per_1000_gpu_hours": round(1000.0 * false_hangs / gpu_hours, 3) if gpu_hours else None,
            "cpu_s": round(sum(r["cpu_s"] for r in rows), 1),
            **({"models": summarize_models([r["models"] for r in rows])} if all("models" in r for r in rows) else {})}


def _straggler_row(k: dict) -> dict:
    tp = k["detected"]
    flagged = tp + k["false_flags"]
    return {"faults": k["faults"], "recall": round(tp / k["faults"], 3) if k["faults"] else None,
            "precision": round(tp / flagged, 3) if flagged else None, "false_flags": k["false_flags"],
            "latency_s_median": float(np.median(k["latencies"])) if k["latencies"] else None,
            "latency_s_max": max(k["latencies"]) if k["latencies"] else None}


def _hang_row(k: dict) -> dict:
    return {"hangs": k["hangs"], "named_within_60s": k["named"],
            "named_share": round(k["named"] / k["hangs"], 3) if k["hangs"] else None,
            "cause_right": k["cause_right"], "rank_right": k["rank_right"],
            "latency_s_median": float(np.median(k["latencies"])) if k["latencies"] else None,
            "latency_s_max": max(k["latencies"]) if k["latencies"] else None}


def _stall_row(c: dict) -> dict:
    return {"intervals": c["intervals"], "recall": round(c["found"] / c["intervals"], 3) if c["intervals"] else None,
            "latency_s_median": float(np.median(c["latencies"])) if c["latencies"] else None,
            "latency_s_max": max(c["latencies"]) if c["latencies"] else None,
            "precision": round(c["correct_s"] / c["predicted_s"], 3) if c["predicted_s"] else None,
            "cause_accuracy": round(c["correct_s"] / c["truth_s"], 3) if c["truth_s"] else None,
            "truth_s": round(c["truth_s"], 1)}


def format_summary(summary: dict, rows: list[dict]) -> str:
    out = [f"{len(rows)} scenarios", "", f"{'straggler kind':<16}{'faults':>7}{'recall':>8}{'precision':>10}"
           f"{'false':>7}{'latency med/max s':>19}"]
    for kind, r in [*summary["stragglers"].items(), ("all", summary["straggler_overall"])]:
        lat = f"{_f(r['latency_s_median'])}/{_f(r['latency_s_max'])}"
        out.append(f"{kind:<16}{r['faults']:>7}{_f(r['recall']):>8}{_f(r['precision']):>10}{r['false_flags']:>7}{lat:>19}")
    out += ["", f"{'stall cause':<16}{'intervals':>10}{'recall':>8}{'precision':>10}{'cause acc':>10}{'truth s':>9}"
                f"{'latency med/max s':>19}"]
    for cause, r in summary["stalls"].items():
        lat = f"{_f(r['latency_s_median'])}/{_f(r['latency_s_max'])}"
        out.append(f"{cause:<16}{r['intervals']:>10}{_f(r['recall']):>8}{_f(r['precision']):>10}"
                   f"{_f(r['cause_accuracy']):>10}{r['truth_s']:>9.0f}{lat:>19}")
    out += ["", f"{'rank hang kind':<16}{'hangs':>7}{'named<=60s':>11}{'cause ok':>9}{'rank ok':>8}"
                f"{'latency med/max s':>19}"]
    for kind, r in summary["hangs"].items():
        lat = f"{_f(r['latency_s_median'])}/{_f(r['latency_s_max'])}"
        out.append(f"{kind:<16}{r['hangs']:>7}{r['named_within_60s']:>11}{r['cause_right']:>9}{r['rank_right']:>8}"
                   f"{lat:>19}")
    out += [f"false hang findings: {summary['false_hang_findings']} in {summary['gpu_hours']:.0f} GPU-hours "
            f"({_f(summary['false_hang_findings_per_1000_gpu_hours'])} per 1,000 GPU-hours)"]
    out += ["", f"loss causes within tolerance: {summary['loss_within_tolerance']}",
            f"false straggler flags: {summary['false_straggler_flags']} in {summary['gpu_hours']:.0f} GPU-hours "
            f"({_f(summary['false_flags_per_1000_gpu_hours'])} per 1,000 GPU-hours)",
            f"scoring CPU: {summary['cpu_s']:.0f} s (simulation included)"]
    if "models" in summary:
        out += ["", *format_models(summary["models"])]
    return "\n".join(out)


def _f(v) -> str:
    return "-" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)
