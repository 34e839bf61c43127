"""Hang localisation over many simulated jobs with realistic noise (seeded, drawn here, not picked): the hung rank's
node, GPU and rank are named within 60 s of the hang at a 15 s scrape in at least 95 % of them, and jobs where no
rank hangs (checkpoints, a hang of the whole job, a lost member, storage, a slow rank, pause storms, link flaps;
5 s and 15 s samples) never get a culprit."""
from __future__ import annotations

import random

import pyarrow as pa
import pytest

from lockstep.analytics.evaluation import truthcheck
from lockstep.analytics.evaluation.simframe import build_features
from lockstep.analytics.frame.inputs import INPUT_METRICS
from lockstep.analytics.scoring.score import score_features
from lockstep.simulator.scenario import RANK_HANG_KINDS, parse_scenario
from lockstep.simulator.series import tables
from lockstep.simulator.truth import Truth

HUNG, HEALTHY = 24, 12
# dozens of simulated jobs: make test runs them, make test-fast leaves them out
pytestmark = [pytest.mark.slow, pytest.mark.long(75)]


def checked(doc: dict) -> tuple[dict, float]:
    sc = parse_scenario(doc, f"{doc['name']}.yaml")
    truth = Truth(sc)
    frame = pa.concat_tables(list(tables(sc, truth, metrics=INPUT_METRICS))).to_pandas()
    res = score_features(build_features(frame), sc.start_timestamp, sc.sample_period_s)["1"]
    gpu_hours = sc.cluster.nodes * sc.cluster.gpus_per_node * sc.duration_s / 3600
    return truthcheck.check_hangs(truth.document(), res, sc.start_timestamp, sc.sample_period_s), gpu_hours


def job(r: random.Random, nodes: int, checkpoint: float) -> dict:
    out = {"job_id": "1", "nodes": nodes, "step_time_s": r.choice([0.8, 1.5, 3.0])}
    if r.random() < checkpoint:
        out["checkpoint"] = {"every_s": r.choice([180, 300, 600]), "blocking_s": r.choice([20, 45, 90])}
    return out


def hung(seed: int) -> dict:
    r = random.Random(seed)
    nodes = r.choice([2, 4, 8])
    start = round(r.uniform(200, 800), 1)
    fault = {"kind": RANK_HANG_KINDS[seed % 3], "node": f"node{r.randrange(nodes):02d}", "gpu": r.randrange(8),
             "start_s": start, "end_s": round(start + r.uniform(120, 600), 1)}
    return {"name": f"hung-{seed}", "seed": seed, "duration_s": 1500, "sample_period_s": 15,
            "cluster": {"nodes": nodes, "gpus_per_node": 8, "nodes_per_rack": 4}, "job": job(r, nodes, 0.5),
            "faults": [fault], "noise": {"transients_per_gpu_hour": r.choice([0.0, 0.5])}}


def healthy(seed: int) -> dict:
    r = random.Random(1000 + seed)
    nodes = r.choice([2, 4])
    faults = []
    for kind in r.sample(["hang", "member_lost", "storage_starvation", "slow_rank", "pause_storm", "link_flap"], 2):
        a = round(r.uniform(100, 1000), 1)
        fault = {"kind": kind, "start_s": a, "end_s": round(a + r.uniform(60, 300), 1)}
        if kind not in ("hang", "storage_starvation"):
            fault["node"] = f"node{r.randrange(nodes):02d}"
        fault.update({"slow_rank": {"gpu": r.randrange(8), "slowdown": 3.0}, "pause_storm": {"nic": r.randrange(8)},
                      "link_flap": {"hca": r.randrange(8), "flaps": 2},
                      "storage_starvation": {"read_cap_bytes_per_s": 1e7}}.get(kind, {}))
        faults.append(fault)
    return {"name": f"healthy-{seed}", "seed": seed, "duration_s": 1500, "sample_period_s": r.choice([5, 15]),
            "cluster": {"nodes": nodes, "gpus_per_node": 8, "nodes_per_rack": 4}, "job": job(r, nodes, 1.0),
            "faults": faults, "noise": {"transients_per_gpu_hour": 1.0}}


@pytest.fixture(scope="module")
def hangs() -> list[dict]:
    return [h for seed in range(HUNG) for h in checked(hung(seed))[0]["expected"]]


def test_the_hung_rank_is_named_within_a_minute_in_95_percent_of_jobs(hangs):
    assert len(hangs) == HUNG
    named = [h for h in hangs if h["named"] and h["rank_right"] and h["cause_right"]]
    assert len(named) >= 0.95 * HUNG, [h for h in hangs if h not in named]
    for kind in RANK_HANG_KINDS:
        assert any(h["kind"] == kind for h in named), kind


@pytest.mark.parametrize("seed", range(HEALTHY))
def test_no_culprit_in_a_job_where_no_rank_hangs(seed):
    check, _ = checked(healthy(seed))
    assert check["expected"] == [] and check["false_findings"] == []
