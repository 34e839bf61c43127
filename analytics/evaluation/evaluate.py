"""``lockstep analytics evaluate``: run the simulator model in-process, score its series with the
same code the service uses, and print the contract's evaluation report (optionally with the
comparison against the scenario's ground truth)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from lockstep.analytics.evaluation.simframe import score_frame
from lockstep.analytics.frame.inputs import INPUT_METRICS
from lockstep.analytics.scoring.evidence import plain
from lockstep.analytics.scoring.score import JobResult


@dataclass(frozen=True)
class Run:
    scenario: str
    frame: pd.DataFrame
    truth: dict
    start: float
    period: float
    outage: object | None = None      # the scenario's prometheus_outage (the evaluation replays it)


def simulate(path: str | Path, inputs_only: bool = False) -> Run:
    """The scenario's series frame and truth document (the simulator's own functions, in-process);
    ``inputs_only``: just the metrics the scorers read (a 1,024-GPU hour then fits in memory)."""
    import pyarrow as pa

    from lockstep.simulator.scenario import load_scenario
    from lockstep.simulator.series import tables
    from lockstep.simulator.truth import Truth

    scenario = load_scenario(path)
    truth = Truth(scenario)
    chunks = tables(scenario, truth, metrics=INPUT_METRICS if inputs_only else None)
    frame = pa.concat_tables(list(chunks)).to_pandas()
    doc = truth.document()
    return Run(scenario.name, frame, doc, float(doc["start_timestamp"]), float(doc["sample_period_s"]),
               scenario.prometheus_outage)


def report(name: str, results: dict[str, JobResult]) -> dict:
    """The evaluation report of docs/architecture.md (``loss`` is one object for a one-job scenario),
    with ``imbalance``: one finding per job that has any (``[]`` when every job is balanced),
    ``slowdowns``: the job-wide slowdowns with their cause, ``ledger``: each job's goodput ledger (one
    object for one job, as ``loss``), and ``hangs``: each rank a hung job waited for, as NCCL's RAS named
    it (``[]`` when none), ``checkpoints``: each checkpoint measured (start, duration, bytes, bandwidth)."""
    stragglers = [plain(d) for r in results.values() for d in r.detections]
    stalls = [plain(s) for r in results.values() for s in r.stalls]
    losses = [{k: v for k, v in r.loss.items() if k != "goodput_ratio"} for r in results.values()]
    ledgers = [plain(r.ledger_account) for r in results.values()]
    return {"scenario": name, "stragglers": stragglers, "stalls": stalls,
            "loss": losses[0] if len(losses) == 1 else losses,
            "imbalance": [plain(r.imbalance) for r in results.values() if r.imbalance["ranks"]],
            "hangs": [plain(h) for r in results.values() for h in r.hangs],
            "slowdowns": [plain(d) for r in results.values() for d in r.slowdowns],
            "ledger": ledgers[0] if len(ledgers) == 1 else ledgers,
            "checkpoints": [plain(c) for r in results.values() for c in r.checkpoints]}


def evaluate(path: str | Path) -> tuple[Run, dict[str, JobResult], dict]:
    run = simulate(path, inputs_only=True)
    results = score_frame(run.frame, run.start, run.period)
    return run, results, report(run.scenario, results)


def format_text(rep: dict, title: str | None = None) -> str:
    lines = [title or f"scenario {rep['scenario']}"]
    for d in rep["stragglers"]:
        where = d["node"] + (f" gpu {d['gpu']}" if d["gpu"] is not None else " (node-wide)")
        why = f"; {d['cause']}" + (" since the start" if d.get("since_start") else "") if d.get("cause") else ""
        todo = f"; {d['action']}" if d.get("action") else ""
        lines.append(f"  straggler  job {d['job_id']} {where} first detected at {d['first_detected_s']:.0f}s "
                     f"score {d['score']:.2f}{why}{todo}")
    for s in rep["stalls"]:
        lines.append(f"  stall      job {s['job_id']} {s['start_s']:.0f}-{s['end_s']:.0f}s {s['cause']}")
    for d in rep.get("slowdowns", []):
        lines.append(f"  slowdown   job {d['job_id']} {d['start_s']:.0f}-{d['end_s']:.0f}s {d['cause']} (pace "
                     f"{d['pace_ratio']:.2f}x its baseline, reported at {d['first_detected_s']:.0f}s); "
                     f"{d['lost_gpu_seconds']:.0f} GPU-s")
    for c in rep.get("checkpoints", []):
        lines.append(f"  checkpoint job {c['job_id']} at {c['start_s']:.0f}s {c['duration_s']:.1f}s {c['bytes'] / 1e9:.0f} GB "
                     f"at {c['bandwidth_bytes_per_second'] / 1e9:.1f} GB/s")
    for loss in rep["loss"] if isinstance(rep["loss"], list) else [rep["loss"]]:
        lost = ", ".join(f"{k} {v:.0f}" for k, v in loss["lost_gpu_seconds"].items() if v)
        lines.append(f"  loss       job {loss['job_id']} allocated {loss['allocated_gpu_seconds']:.0f} GPU-s; "
                     f"lost {lost or 'nothing'}")
    for h in rep.get("hangs", []):
        lines.append(f"  hung rank  job {h['job_id']} {h['node']} gpu {h['gpu']} rank {h['rank'] or '?'} ({h['cause']}) "
                     f"first named at {h['first_named_s']:.0f}s")
    for imb in rep.get("imbalance", []):
        if imb["ranks"]:
            ranks = ", ".join(f"{r['node']} gpu {r['gpu']} {r['ratio']:.2f}x" for r in imb["ranks"][:8])
            more = f" (+{len(imb['ranks']) - 8} more)" if len(imb["ranks"]) > 8 else ""
            lines.append(f"  imbalance  job {imb['job_id']} since the start: {ranks}{more}; "
                         f"{imb['lost_gpu_seconds']:.0f} GPU-s spent waiting for it; {imb.get('cause', 'work')}")
    ledgers = rep.get("ledger", [])
    for book in ledgers if isinstance(ledgers, list) else [ledgers]:
        parts = [f"{kind}{'/' + cause if cause else ''} {v:.0f}" for kind, causes in book["gpu_seconds"].items()
                 for cause, v in causes.items() if round(v)]
        lines.append(f"  ledger     job {book['job_id']} {book['allocated_gpu_seconds']:.0f} GPU-s: {', '.join(parts)}")
    return "\n".join(lines)
