"""Job-wide slowdowns: every rank slower than the job's own recent baseline, no stall.

On the shipped scenarios the expectations come from the scenario files and the simulator's truth
(``slowdowns``: each slowing fault, its cause, the GPU-seconds the model lost to it, whether it must be
reported: ≥ 15% for ≥ 2 minutes). The detector's shape is tested on job signals built here: a fall
of the work rate with each kind of evidence beside it, and the falls it must not report.
"""
from __future__ import annotations

import numpy as np
import pytest
import yaml

from lockstep.analytics.scoring import slowdown
from lockstep.analytics.scoring.score import score_features
from lockstep.analytics.scoring.stall import JobSignals
from lockstep.analytics.service.metrics import job_samples
from lockstep.analytics.service.state import LossCounters
from lockstep.analytics.service.views import job_view
from lockstep.exporters.catalog import analytics as cat
from tests.helpers.paths import REPO

SCENARIOS = REPO / "simulator/scenarios"
SLOWED = ["input-starvation", "fabric-slowdown", "power-cap", "slowdowns-edge"]
# none of these slows its whole job: quiet noisy runs, stalls of every cause, stragglers, imbalance, a restart
STEADY = ["quiet-1", "quiet-3", "quiet-5", "thermal-straggler", "storage-starvation", "pause-storm", "groups",
          "transients", "defect-thermal", "restart", "member-lost"]


@pytest.fixture(scope="module", params=SLOWED + STEADY)
def evaluated(request, evaluation):
    run, results, report = evaluation.evaluate(SCENARIOS / f"{request.param}.yaml")
    return request.param, run, results, report


def _overlaps(a: dict, b: dict) -> bool:
    return a["start_s"] < b["end_s"] and b["start_s"] < a["end_s"]


@pytest.mark.slow     # simulates whole scenarios: make test runs it, make test-fast leaves it out
def test_every_slowdown_that_must_be_is_reported_with_its_cause_and_cost(evaluated):
    """Within two minutes of its start, with the truth's cause, its GPU-seconds within 20% of the truth's."""
    name, run, _, report = evaluated
    for want in run.truth["slowdowns"]:
        if not want["required"]:
            continue
        found = [d for d in report["slowdowns"] if _overlaps(d, want)]
        assert len(found) == 1, (name, want, report["slowdowns"])
        (got,) = found
        assert got["cause"] == want["cause"], (name, got, want)
        assert got["first_detected_s"] - want["start_s"] <= 120.0, (name, got)
        assert got["lost_gpu_seconds"] == pytest.approx(want["lost_gpu_seconds"], rel=0.2), (name, got, want)


@pytest.mark.slow     # simulates whole scenarios: make test runs it, make test-fast leaves it out
def test_nothing_is_reported_where_the_whole_job_did_not_slow(evaluated):
    name, run, _, report = evaluated
    for got in report["slowdowns"]:
        assert any(_overlaps(got, want) for want in run.truth["slowdowns"]), (name, got)
    if name in STEADY:
        assert report["slowdowns"] == []
        assert report["ledger"]["gpu_seconds"]["slowdown"] == dict.fromkeys(("storage", "network", "power", "unknown"), 0.0)


@pytest.mark.slow     # simulates whole scenarios: make test runs it, make test-fast leaves it out
def test_a_slowdown_is_no_stall_and_no_straggler(evaluated):
    """Congestion, a cap or slow input that slow every rank together: the only stalls are the scenario's
    checkpoints, and no rank is flagged."""
    name, run, _, report = evaluated
    if name in SLOWED:
        assert {s["cause"] for s in report["stalls"]} <= {"checkpoint"}, report["stalls"]
        assert report["stragglers"] == []


@pytest.mark.slow     # simulates whole scenarios: make test runs it, make test-fast leaves it out
def test_what_a_slowdown_costs_is_in_the_loss_account_under_its_cause(evaluation):
    run, _, report = evaluation.evaluate(SCENARIOS / "input-starvation.yaml")
    (slowed,) = report["slowdowns"]
    assert report["loss"]["lost_gpu_seconds"]["storage"] == pytest.approx(slowed["lost_gpu_seconds"], abs=1.0)
    assert report["ledger"]["gpu_seconds"]["slowdown"]["storage"] == pytest.approx(slowed["lost_gpu_seconds"], abs=1.0)


def test_no_alert_rule_reads_a_slowdown():
    """A slowdown alone never pages (nor tickets): it is in the API, the reports, the dashboard and the ledger."""
    rules = yaml.safe_load((REPO / "deploy/prometheus/lockstep-rules.yml").read_text())
    exprs = [r["expr"] for g in rules["groups"] for r in g["rules"] if "alert" in r]
    assert exprs and not any(cat.JOB_SLOWDOWN.name in e or cat.JOB_PACE_RATIO.name in e for e in exprs)


@pytest.mark.slow     # simulates whole scenarios: make test runs it, make test-fast leaves it out
def test_the_service_view_and_metrics_carry_the_slowdown_in_progress(evaluation):
    """The input starvation scored up to 900 s: the job is slowed, by storage, since about 600 s."""
    run, results, _ = evaluation.evaluate(SCENARIOS / "input-starvation.yaml")
    from lockstep.analytics.evaluation.simframe import build_features
    features = build_features(run.frame[run.frame["timestamp"] <= run.start + 890])
    (res,) = score_features(features, run.start, run.period).values()
    view = job_view(res, LossCounters())
    assert view.slowdown.slowed and view.slowdown.cause == "storage"
    assert 600 <= view.slowdown.since - run.start <= 620 and 0.7 < view.slowdown.pace_ratio < 0.9
    samples = {s.metric.name: s for s in job_samples(view, LossCounters())}
    assert samples[cat.JOB_SLOWDOWN.name].labels == ("5501", "storage")
    assert samples[cat.JOB_PACE_RATIO.name].value == view.slowdown.pace_ratio


# --- the detector's shape ------------------------------------------------------------------------

P, N, RANKS = 5.0, 240, 16          # 20 minutes of a 16-rank job


def _signals(fall: float = 0.0, start: int = 120, samples: int = 36, evidence: str = "reads",
             seed: int = 1) -> tuple[JobSignals, dict[str, np.ndarray]]:
    """Every rank's compute activity ~0.6 with a few percent of jitter; from ``start`` for ``samples``
    samples the work rate falls by ``fall`` with ``evidence`` beside it: reads (the input), io_wait (the job's
    cgroup stalls on I/O for that share of the time, no read the node counts: a loader reading from an object
    store), pause (the fabric), clock (a cap: the clock falls, activity does not), none."""
    rng = np.random.default_rng(seed)
    work = 0.6 * (1 + 0.03 * rng.standard_normal((N, RANKS)))
    clock = np.full((N, RANKS), 0.99)
    on = slice(start, start + samples)
    if evidence == "clock":
        clock[on] *= 1 - fall
    else:
        work[on] *= 1 - fall
    totals = {"read": np.full(N, 2.0e9 if evidence == "reads" else 0.0), "write": np.full(N, 1.0e6),
              "pause": np.zeros(N), "cnp": np.full(N, 10.0), "xmit_wait": np.full(N, 1.0e3), "tx": np.full(N, 1e10)}
    totals["io_wait"] = np.full(N, 0.005)
    if evidence == "io_wait":
        totals["io_wait"][on] = fall
    if evidence == "pause":
        totals["pause"][on] = 0.8
        totals["cnp"][on] = 1.0e4
    js = JobSignals(np.arange(N) * P, work, work, np.median(work, axis=1), 0.6, totals, np.zeros(N, bool))
    return js, {"clock": clock}


def _detect(**kw) -> slowdown.SlowdownResult:
    js, sig = _signals(**kw)
    return slowdown.detect(js, sig, np.ones(N, bool), P)


@pytest.mark.parametrize("evidence, cause", [("reads", "storage"), ("io_wait", "storage"), ("pause", "network"),
                                             ("clock", "power"), ("none", "unknown")])
def test_a_fall_of_every_rank_is_reported_with_the_cause_its_evidence_shows(evidence, cause):
    res = _detect(fall=0.2, evidence=evidence)
    slowed = np.flatnonzero(res.slowed)
    assert 118 <= slowed[0] <= 122 and 154 <= slowed[-1] <= 158          # the 36 samples, whole
    assert set(res.causes[res.slowed]) == {cause}
    assert int(np.argmax(res.confirmed)) - 120 <= 120 / P                  # reported within two minutes
    assert res.lost.sum() == pytest.approx(0.2 * RANKS * 36 * P, rel=0.15)


@pytest.mark.parametrize("fall, samples", [(0.0, 36), (0.04, 36), (0.2, 8)])
def test_jitter_a_mild_fall_or_a_short_one_is_no_slowdown(fall, samples):
    for seed in range(5):
        assert not _detect(fall=fall, samples=samples, seed=seed).slowed.any()


def test_a_slowdown_that_fills_the_window_is_judged_against_the_baseline_learned_before():
    js, sig = _signals(fall=0.2, start=0, samples=N)
    assert not slowdown.detect(js, sig, np.ones(N, bool), P).slowed.any()     # its own pace is all it knows
    res = slowdown.detect(js, sig, np.ones(N, bool), P, prior=0.6 * 0.99)
    assert res.slowed[1:].all() and res.learned == pytest.approx(0.6 * 0.99)


def test_samples_that_do_not_run_are_left_out():
    js, sig = _signals(fall=0.2)
    running = np.ones(N, bool)
    running[130:140] = False            # a checkpoint inside the slowdown
    res = slowdown.detect(js, sig, running, P)
    assert not res.slowed[130:140].any() and res.slowed[123:130].all() and res.slowed[140:155].all()
    assert res.lost[130:140].sum() == 0.0


def test_features_without_a_clock_use_activity_alone():
    js, _ = _signals(fall=0.2)
    res = slowdown.detect(js, {"clock": np.full((N, RANKS), np.nan)}, np.ones(N, bool), P)
    assert res.slowed[125:150].all()
