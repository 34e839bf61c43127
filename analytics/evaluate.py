"""``lockstep analytics evaluate``: run the simulator model in-process, score its series with the
same code the service uses, and print the contract's evaluation report (optionally with the
comparison against the scenario's ground truth)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analytics.score import JobResult, score_frame


@dataclass(frozen=True)
class Run:
    scenario: str
    frame: pd.DataFrame
    truth: dict
    start: float
    period: float


def simulate(path: str | Path) -> Run:
    """The scenario's series frame and truth document (the simulator's own functions, in-process)."""
    import pyarrow as pa

    from simulator.scenario import load_scenario
    from simulator.series import tables
    from simulator.truth import Truth

    scenario = load_scenario(path)
    truth = Truth(scenario)
    frame = pa.concat_tables(list(tables(scenario, truth))).to_pandas()
    doc = truth.document()
    return Run(scenario.name, frame, doc, float(doc["start_timestamp"]), float(doc["sample_period_s"]))


def report(name: str, results: dict[str, JobResult]) -> dict:
    """The evaluation report of ARCHITECTURE.md (``loss`` is one object for a one-job scenario)."""
    stragglers = [d for r in results.values() for d in r.detections]
    stalls = [{k: v for k, v in s.items() if k != "evidence"} | {"evidence": _plain(s["evidence"])}
              for r in results.values() for s in r.stalls]
    losses = [{k: v for k, v in r.loss.items() if k != "goodput_ratio"} for r in results.values()]
    return {"scenario": name, "stragglers": stragglers, "stalls": stalls,
            "loss": losses[0] if len(losses) == 1 else losses}


def _plain(evidence: dict) -> dict:
    return {k: (None if isinstance(v, float) and v != v else v) for k, v in evidence.items()}


def evaluate(path: str | Path) -> tuple[Run, dict[str, JobResult], dict]:
    run = simulate(path)
    results = score_frame(run.frame, run.start, run.period)
    return run, results, report(run.scenario, results)


def format_text(rep: dict, title: str | None = None) -> str:
    lines = [title or f"scenario {rep['scenario']}"]
    for d in rep["stragglers"]:
        where = d["node"] + (f" gpu {d['gpu']}" if d["gpu"] is not None else " (node-wide)")
        lines.append(f"  straggler  job {d['job_id']} {where} first detected at {d['first_detected_s']:.0f}s "
                     f"score {d['score']:.2f}")
    for s in rep["stalls"]:
        lines.append(f"  stall      job {s['job_id']} {s['start_s']:.0f}-{s['end_s']:.0f}s {s['cause']}")
    for loss in rep["loss"] if isinstance(rep["loss"], list) else [rep["loss"]]:
        lost = ", ".join(f"{k} {v:.0f}" for k, v in loss["lost_gpu_seconds"].items() if v)
        lines.append(f"  loss       job {loss['job_id']} allocated {loss['allocated_gpu_seconds']:.0f} GPU-s; "
                     f"lost {lost or 'nothing'}")
    return "\n".join(lines)
