"""Hang localisation (analytics/scoring/hang.py) on the simulator's series: the rank a hung job waits for is named
with its node, GPU and rank from what NCCL's RAS answers, fast enough; a job that stands still for any other
reason, or that runs, never gets a culprit. Expectations come from the scenarios, never from the scorer."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lockstep.analytics.evaluation import truthcheck
from lockstep.analytics.evaluation.simframe import build_features
from lockstep.analytics.frame.inputs import INPUT_METRICS
from lockstep.analytics.scoring import hang
from lockstep.analytics.scoring.score import score_features
from lockstep.analytics.service.metrics import job_samples
from lockstep.analytics.service.state import LossCounters
from lockstep.analytics.service.views import job_view
from lockstep.exporters.catalog import analytics as cat
from lockstep.exporters.catalog.enums import HANG, RANK_DEAD, RANK_STOPPED
from lockstep.simulator import hardware as hw
from lockstep.simulator.scenario import parse_scenario
from lockstep.simulator.series import series_frame, tables
from lockstep.simulator.truth import Truth

JOB = "88"


def scenario(*faults: dict, period: float = 15, duration: float = 900, nodes: int = 4, checkpoint: bool = True,
             **top):
    job = {"job_id": JOB, "nodes": nodes, "step_time_s": 1.5}
    if checkpoint:
        job["checkpoint"] = {"every_s": 300, "blocking_s": 45}
    return parse_scenario({"name": "h", "seed": 9, "duration_s": duration, "sample_period_s": period,
                           "cluster": {"nodes": nodes, "gpus_per_node": 8, "nodes_per_rack": 4}, "job": job,
                           "faults": list(faults), **top}, "h.yaml")


def scored(sc):
    truth = Truth(sc)
    frame = pa.concat_tables(list(tables(sc, truth, metrics=INPUT_METRICS))).to_pandas()
    features = build_features(frame)
    res = score_features(features, sc.start_timestamp, sc.sample_period_s)[JOB]
    return res, truth.document(), features


def checked(sc):
    res, truth, _ = scored(sc)
    return res, truth, truthcheck.check_hangs(truth, res, sc.start_timestamp, sc.sample_period_s)


@pytest.mark.parametrize("kind,cause", [("rank_stopped", RANK_STOPPED),
                                        pytest.param("rank_died", RANK_DEAD, marks=pytest.mark.slow),
                                        pytest.param("peer_dead", RANK_DEAD, marks=pytest.mark.slow)])
def test_the_hung_rank_is_named_with_node_gpu_and_rank_within_a_minute(kind, cause):
    sc = scenario({"kind": kind, "node": "node02", "gpu": 5, "start_s": 410, "end_s": 800})
    res, truth, check = checked(sc)
    [h] = check["expected"]
    assert h["named"] and h["latency_s"] <= 60 and h["cause_right"] and h["rank_right"], h
    assert check["false_findings"] == []
    [found] = res.hangs
    assert (found["node"], found["gpu"], found["rank"], found["cause"]) == ("node02", "5", "21", cause)
    # the evidence of the localised stall says what RAS said of the rank
    i = int(np.flatnonzero(res.causes == cause)[-1])
    [culprit] = res.evidence[i]["culprits"]
    if cause == RANK_STOPPED:
        assert culprit["ras"] == "behind" and culprit["collectives_behind"] == 4   # one step of AllReduce
    else:
        assert culprit["ras"] in ("unresponsive", "dead")
    assert sc.start_timestamp + 410 - 2 * hw.RAS_POLL_S <= culprit["last_collective"] <= \
        sc.start_timestamp + 410 + hw.RAS_POLL_S


def test_the_stall_is_named_in_the_service_view_and_its_metrics():
    sc = scenario({"kind": "rank_stopped", "node": "node01", "gpu": 2, "start_s": 410, "end_s": 900})
    res, _, _ = scored(sc)
    view = job_view(res, LossCounters())
    assert view.stall.cause == RANK_STOPPED
    assert [(c["node"], c["gpu"], c["rank"]) for c in view.to_json()["stall"]["evidence"]["culprits"]] == \
        [("node01", "2", "10")]
    samples = job_samples(view, LossCounters())
    assert [s.labels for s in samples if s.metric is cat.JOB_HANG_CULPRIT] == [(JOB, "node01", "2", "10", RANK_STOPPED)]
    assert [s.labels[1] for s in samples if s.metric is cat.JOB_STALLED and s.value == 1] == [RANK_STOPPED]


@pytest.mark.parametrize("faults", [
    [],                                                                          # a running job
    [{"kind": "hang", "start_s": 410, "end_s": 700}],                            # every rank in one collective
    [{"kind": "storage_starvation", "start_s": 400, "end_s": 600, "read_cap_bytes_per_s": 1.0e7}],
    [{"kind": "slow_rank", "node": "node01", "gpu": 1, "start_s": 400, "end_s": 600, "slowdown": 3.0}],
], ids=["running", "job-wide-hang", "storage", "slow-rank"])
@pytest.mark.parametrize("period", [pytest.param(5, marks=pytest.mark.slow), 15])
def test_no_culprit_where_no_rank_hangs(faults, period):
    """Checkpoints every 300 s pause every rank together; with 5 s samples each RAS answer (polled every 15 s)
    is read three times over, the one taken as the job stopped included."""
    res, _, check = checked(scenario(*faults, period=period))
    assert not res.culprits.any() and res.hangs == ()
    assert not {RANK_STOPPED, RANK_DEAD} & set(res.causes)
    assert check["false_findings"] == []


def test_a_job_wide_hang_stays_a_hang():
    res, _, _ = scored(scenario({"kind": "hang", "start_s": 410, "end_s": 700}))
    assert HANG in set(res.causes) and not res.culprits.any()


def test_without_ras_a_hung_rank_is_a_hang():
    """Node agents without the nccl-ras collector: the stall is the plain hang it always was."""
    sc = scenario({"kind": "rank_stopped", "node": "node02", "gpu": 5, "start_s": 410, "end_s": 800})
    truth = Truth(sc)
    frame = pa.concat_tables(list(tables(sc, truth, metrics=INPUT_METRICS))).to_pandas()
    frame = frame[~frame["metric"].astype(str).str.startswith("lockstep_nccl_")]
    res = score_features(build_features(frame), sc.start_timestamp, sc.sample_period_s)[JOB]
    assert HANG in set(res.causes) and not res.culprits.any()


def test_ranks_behind_in_answers_taken_before_the_stall_are_not_named():
    """The stall's first answers may predate it: a rank one step behind while the job still ran is no culprit
    (the localisation waits for an answer taken after the stall began)."""
    sc = scenario({"kind": "hang", "start_s": 410, "end_s": 700}, period=5)
    features = build_features(series_frame(sc))
    causes = np.full(len(features.times), "", dtype=object)
    stalled = (features.times - sc.start_timestamp > 415) & (features.times - sc.start_timestamp <= 700)
    causes[stalled] = HANG
    behind = features.signals["behind"].copy()
    first = int(np.flatnonzero(stalled)[0])
    behind[first:first + 3, 0] = 4.0                # rank 0 behind in three samples...
    age = features.signals["ras_age"].copy()
    age[first:first + 3, 0] = 14.0                  # ...of one answer taken before the stall
    local = hang.localise(features.__class__(features.times, features.columns,
                                             {**features.signals, "behind": behind, "ras_age": age},
                                             features.pods, features.ranks),
                          JOB, causes, [{} for _ in causes])
    assert not local.culprits[first:first + 3].any()


def test_most_ranks_behind_is_no_ranks_hang():
    sc = scenario({"kind": "hang", "start_s": 410, "end_s": 700})
    features = build_features(series_frame(sc))
    causes = np.where(features.times - sc.start_timestamp > 450, HANG, "").astype(object)
    causes[features.times - sc.start_timestamp > 700] = ""
    behind = features.signals["behind"].copy()
    behind[:, : behind.shape[1] // 2 + 1] = 4.0      # over half the ranks "behind": no one rank's hang
    local = hang.localise(features.__class__(features.times, features.columns, {**features.signals, "behind": behind},
                                             features.pods, features.ranks), JOB, causes, [{} for _ in causes])
    assert not local.culprits.any() and set(local.causes) == {"", HANG}
