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
from collections.abc import Callable
from pathlib import Path

import numpy as np

from lockstep.analytics.evaluation import truthcheck
from lockstep.analytics.evaluation.evaluate import evaluate
from lockstep.analytics.evaluation.models import format_models, summarize_models, weigh
from lockstep.analytics.evaluation.replay import Outage, replay

FLEET_DIR = "fleet"


def run_all(directory: str | Path, models: bool = False, evaluator: Callable = evaluate) -> list[dict]:
    """Every scenario of ``directory`` scored and checked; ``models``: also the scikit-learn
    alternatives of ``lockstep.analytics.evaluation.models``, measured on the same results;
    ``evaluator``: what simulates and scores one scenario file (the tests pass one that keeps results)."""
    rows = []
    for path in sorted(Path(directory).rglob("*.y*ml")):      # large/: the 1,024-GPU hour
        if FLEET_DIR in path.relative_to(directory).parts[:-1]:   # fleet scenarios: `evaluate-fleet`
            continue
        started = time.process_time()
        run, results, rep = evaluator(path)
        row = {"scenario": run.scenario, "file": str(path), "report": rep, "truth": run.truth,
               "check": truthcheck.check(run.truth, results, run.start, run.period),
               "cpu_s": round(time.process_time() - started, 2)}
        if models:
            row["models"] = weigh(run.truth, results, run.start, run.period)
        if run.outage is not None:
            row["replay"] = _replayed(run)
        rows.append(row)
    return rows


def _replayed(run) -> dict:
    """The run through the service's refresh with its Prometheus outage: what its ledger sums to."""
    o = run.outage
    job_id = str(run.truth["jobs"][0]["job_id"])
    counters = replay(run.frame, job_id, run.start, run.truth["duration_s"], run.period,
                      Outage(run.start + o.start_s, run.start + o.end_s, run.start + o.start_s + o.lost_s))
    total = sum(v for by_cause in counters.ledger.values() for v in by_cause.values())
    return {"allocated": counters.allocated, "ledger_sum": total, "sum_error": abs(total - counters.allocated),
            "slowdown_gpu_seconds": {c: round(v, 1) for c, v in counters.ledger["slowdown"].items() if v}}


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
            **_causes_and_ledger(rows), "checkpoints": _checkpoints(rows),
            "gpu_hours": round(gpu_hours, 1), "false_straggler_flags": int(false_total),
            "false_flags_per_1000_gpu_hours": round(1000.0 * false_total / gpu_hours, 3) if gpu_hours else None,
            "hangs": {k: _hang_row(v) for k, v in sorted(hangs.items())}, "false_hang_findings": false_hangs,
            "false_hang_findings_per_1000_gpu_hours": round(1000.0 * false_hangs / gpu_hours, 3) if gpu_hours else None,
            "cpu_s": round(sum(r["cpu_s"] for r in rows), 1),
            **({"models": summarize_models([r["models"] for r in rows])} if all("models" in r for r in rows) else {})}


def _causes_and_ledger(rows: list[dict]) -> dict:
    """Cause accuracy per finding kind, slowdowns, the ledger's errors and false findings (module docstring)."""
    kinds = {k: [0, 0] for k in ("straggler", "imbalance")}
    slowed = {"required": 0, "right_cause": 0, "detected": 0, "latencies": [], "errors": []}
    ledger: dict[str, dict] = {}
    exact = []
    quiet_hours, quiet = 0.0, {"stragglers": 0, "slowdowns": 0, "hardware": 0}
    for row in rows:
        fault_free = not row["truth"]["faults"] and row["truth"].get("noise", "none") != "none"
        if fault_free:
            quiet_hours += row["truth"]["loss"]["allocated_gpu_seconds"] / 3600.0
        for job in row["check"].values():
            for kind, c in job["causes"].items():
                kinds[kind][0] += c["total"]
                kinds[kind][1] += c["right"]
            for s in job["slowdowns"]["expected"]:
                if not s["required"]:
                    continue
                slowed["required"] += 1
                slowed["right_cause"] += int(s["found_cause"] == s["cause"])
                slowed["detected"] += int(s["detected"])
                if s["detected"]:
                    slowed["latencies"].append(s["latency_s"])
                    slowed["errors"].append(s["relative_error"])
            if fault_free:
                for name, n in job["false_findings"].items():
                    quiet[name] += n
            book = job.get("ledger") or {}
            for key, e in book.get("entries", {}).items():
                agg = ledger.setdefault(key, {"truth": 0.0, "abs_error": 0.0, "ok": 0, "n": 0})
                agg["truth"] += e["truth"]
                agg["abs_error"] += abs(e["error"])
                agg["ok"] += int(e["ok"])
                agg["n"] += 1
            if book:
                exact.append(book["sum_error"])
        if "replay" in row:
            exact.append(row["replay"]["sum_error"])
    ratio = lambda a, b: round(a / b, 3) if b else None  # noqa: E731
    return {
        "cause_accuracy": {**{k: {"findings": n, "accuracy": ratio(r, n)} for k, (n, r) in kinds.items()},
                           "slowdown": {"findings": slowed["required"], "accuracy": ratio(slowed["right_cause"],
                                                                                          slowed["required"])}},
        "slowdowns": {"required": slowed["required"], "detected": slowed["detected"],
                      "recall": ratio(slowed["detected"], slowed["required"]),
                      "latency_s_max": max(slowed["latencies"], default=None),
                      "gpu_seconds_error_max": max(slowed["errors"], default=None)},
        "ledger": {k: {"truth_gpu_h": round(v["truth"] / 3600, 2), "relative_error": ratio(v["abs_error"], v["truth"]),
                       "within_tolerance": f"{v['ok']}/{v['n']}"} for k, v in sorted(ledger.items()) if v["truth"]
                   or v["abs_error"]},
        "ledger_sum_error_max": max(exact, default=None), "ledgers_checked": len(exact),
        "fault_free_gpu_hours": round(quiet_hours, 1),
        "false_findings_per_1000_gpu_hours": {k: round(1000.0 * n / quiet_hours, 3) if quiet_hours else None
                                              for k, n in quiet.items()},
        **({"replays": {r["scenario"]: r["replay"] for r in rows if "replay" in r}}),
    }


def _checkpoints(rows: list[dict]) -> dict:
    """Over every truth checkpoint: how many were measured, how many within tolerance, the largest
    duration and size errors, and the measured ones that match none."""
    found = [c for row in rows for job in row["check"].values() for c in job["checkpoints"]["expected"]]
    measured = [c for c in found if c["found"]]
    return {"truth": len(found), "measured": len(measured),
            "within_tolerance": sum(c["within_tolerance"] for c in found),
            "target_right": sum(c.get("target_right", False) for c in found),
            "duration_error_max": max((c["duration_error"] for c in measured), default=None),
            "size_error_max": max((c["size_error"] for c in measured), default=None),
            "false": sum(len(job["checkpoints"]["false"]) for row in rows for job in row["check"].values())}


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
    out += ["", f"{'finding kind':<16}{'findings':>9}{'cause acc':>10}"]
    for kind, r in summary["cause_accuracy"].items():
        out.append(f"{kind:<16}{r['findings']:>9}{_f(r['accuracy']):>10}")
    sd = summary["slowdowns"]
    out += [f"job-wide slowdowns: {sd['detected']}/{sd['required']} required reported with their cause within 120 s "
            f"(latency max {_f(sd['latency_s_max'])} s, GPU-seconds error max {_f(sd['gpu_seconds_error_max'])})",
            "", *_format_checkpoints(summary["checkpoints"]),
            "", f"{'ledger entry':<24}{'truth GPU-h':>12}{'rel error':>10}{'within tol':>11}"]
    for key, r in summary["ledger"].items():
        out.append(f"{key:<24}{r['truth_gpu_h']:>12.2f}{_f(r['relative_error']):>10}{r['within_tolerance']:>11}")
    out.append(f"ledger sum vs allocation: max error {_f(summary['ledger_sum_error_max'])} GPU-s over "
               f"{summary['ledgers_checked']} ledgers (service replays with an outage included)")
    ff = summary["false_findings_per_1000_gpu_hours"]
    out.append(f"false findings on fault-free noisy runs ({summary['fault_free_gpu_hours']:.0f} GPU-hours), per 1,000 "
               f"GPU-hours: stragglers {_f(ff['stragglers'])}, slowdowns {_f(ff['slowdowns'])}, "
               f"hardware {_f(ff['hardware'])}")
    out += ["", f"loss causes within tolerance: {summary['loss_within_tolerance']}",
            f"false straggler flags: {summary['false_straggler_flags']} in {summary['gpu_hours']:.0f} GPU-hours "
            f"({_f(summary['false_flags_per_1000_gpu_hours'])} per 1,000 GPU-hours)",
            f"scoring CPU: {summary['cpu_s']:.0f} s (simulation included)"]
    if "models" in summary:
        out += ["", *format_models(summary["models"])]
    return "\n".join(out)


def _format_checkpoints(c: dict) -> list[str]:
    pct = lambda v: "-" if v is None else f"{100 * v:.1f} %"  # noqa: E731
    return [f"checkpoints: {c['measured']}/{c['truth']} measured, {c['within_tolerance']} within 10 % in duration and size "
            f"(duration error max {pct(c['duration_error_max'])}, size error max {pct(c['size_error_max'])}), "
            f"{c['target_right']} with their target file system; "
            f"{c['false']} measured where none was written"]


def _f(v) -> str:
    return "-" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)
