"""The jobs of the demo cluster's past month, one after another (``lockstep.demo_history``).

Sizes as shares of the cluster's nodes (the demo may run fewer nodes), fault times as shares of the
job's run (the history may be shorter than a month). The same parts fail again and again, as they
do: node03's GPU 6 reports XID 48 (ECC) in three jobs, node07's HCA 4 flaps in two, node05's GPU 3
runs hot in two; carol's job has a heavier pipeline stage (its last eighth of GPUs 15% slower from
the start: imbalance). Checkpoints block long enough (10-20 minutes: a multi-TB model state) to be seen
at the history's 5-minute step.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from lockstep.simulator.scenario import Scenario, parse_scenario


@dataclass(frozen=True)
class Job:
    job_id: str
    user: str
    days: float                     # share of the history (stretched to its length)
    nodes: float                    # share of the cluster's nodes (the first ones)
    checkpoint: tuple[float, float, float]   # every_s, blocking_s, write_bytes
    faults: tuple[dict, ...] = field(default=())   # scenario faults; *_s fields as shares of the run
    groups: tuple[dict, ...] = field(default=())   # worker groups (noise.groups: share, speed)


JOBS = (
    Job("3101", "alice", 6.0, 1.0, (4 * 3600, 900, 8e12), (
        {"kind": "gpu_throttle", "node": "node05", "gpu": 3, "start_s": 0.3, "end_s": 0.45, "reason": "thermal"},
        {"kind": "xid", "node": "node03", "gpu": 6, "at_s": 0.6, "code": 48})),
    Job("3107", "bob", 4.0, 0.5, (3 * 3600, 600, 3e12), (
        {"kind": "link_flap", "node": "node07", "hca": 4, "start_s": 0.2, "end_s": 0.21, "flaps": 3},)),
    Job("3122", "carol", 7.0, 1.0, (6 * 3600, 1200, 1.2e13), (
        {"kind": "pause_storm", "node": "node02", "nic": 1, "start_s": 0.5, "end_s": 0.503},
        {"kind": "xid", "node": "node03", "gpu": 6, "at_s": 0.7, "code": 48},
        {"kind": "gpu_throttle", "node": "node05", "gpu": 3, "start_s": 0.8, "end_s": 0.9, "reason": "thermal"}),
        ({"share": 0.125, "speed": 0.85},)),
    Job("3130", "dave", 5.0, 0.75, (4 * 3600, 900, 6e12), (
        {"kind": "slow_node", "node": "node09", "start_s": 0.4, "end_s": 0.45},
        {"kind": "link_flap", "node": "node07", "hca": 4, "start_s": 0.6, "end_s": 0.61, "flaps": 2})),
    Job("3141", "alice", 8.0, 1.0, (4 * 3600, 900, 8e12), (
        {"kind": "xid", "node": "node03", "gpu": 6, "at_s": 0.3, "code": 48},)),
)


def scenario_of(job: Job, cluster: dict, start: float, duration_s: float, step_s: float) -> Scenario:
    """The job as a scenario on ``cluster`` over ``duration_s`` from ``start``; faults on nodes the
    cluster lacks are left out, a checkpoint interval longer than the run is shortened to fit."""
    nodes = int(cluster["nodes"])
    every, blocking, written = job.checkpoint
    every = min(every, duration_s / 2)
    faults = [{**f, **{k: round(v * duration_s, 3) for k, v in f.items() if k.endswith("_s")}}
              for f in job.faults if int(f["node"][4:]) < nodes]
    doc = {"name": f"history-{job.job_id}", "seed": int(job.job_id), "duration_s": duration_s,
           "sample_period_s": step_s, "start_timestamp": start, "cluster": dict(cluster),
           "job": {"job_id": job.job_id, "nodes": max(1, round(job.nodes * nodes)), "step_time_s": 1.5,
                   "checkpoint": {"every_s": every, "blocking_s": min(blocking, every / 2), "write_bytes": written}},
           "faults": faults, **({"noise": {"groups": [dict(g) for g in job.groups]}} if job.groups else {})}
    return parse_scenario(doc, f"<demo history job {job.job_id}>")
