"""Every finding with its cause: hardware stragglers apart from work imbalance.

The expectations come from the scenario files and the simulator's truth (which fault each straggler
is, the cause its evidence shows: ``simulator/truth.py``), never from the scorer's output. The judge
of a rank's cause (``lockstep.analytics.scoring.cause``) is also tested on matrices built here, one
shape of evidence at a time.
"""
from __future__ import annotations

import numpy as np
import pytest

from lockstep.analytics.evaluation import truthcheck
from lockstep.analytics.frame.features import REASON_PREFIX
from lockstep.analytics.scoring import cause
from lockstep.analytics.service.metrics import job_samples
from lockstep.analytics.service.state import LossCounters
from lockstep.analytics.service.views import job_view
from lockstep.exporters.catalog import analytics as cat
from lockstep.exporters.toolkit.configfile import load_yaml
from tests.helpers.paths import REPO

SCENARIOS = REPO / "simulator/scenarios"
DEFECTS = sorted(p for p in SCENARIOS.glob("*.yaml") if any(f["kind"] == "gpu_defect" for f in
                                                             load_yaml(p).get("faults") or []))
GROUPS = [SCENARIOS / f"{name}.yaml" for name in ("groups", "subtle-groups", "fast-minority", "stage-and-defect")]
QUIET = sorted(SCENARIOS.glob("quiet-*.yaml"))


@pytest.fixture
def evaluated(evaluation):
    """``(run, results, report)`` of a scenario: the session's one evaluation of it, a fresh copy per call."""
    return evaluation.evaluate


def test_there_are_defect_scenarios_of_every_kind():
    defects = {f["defect"] for p in DEFECTS for f in load_yaml(p)["faults"] if f["kind"] == "gpu_defect"}
    assert defects == {"thermal", "power_brake", "pcie"}


@pytest.mark.slow     # simulates whole scenarios: make test runs it, make test-fast leaves it out
@pytest.mark.parametrize("path", DEFECTS, ids=lambda p: p.stem)
def test_a_gpu_broken_before_the_job_is_a_hardware_straggler_within_60s(path, evaluated):
    """The defect's node and GPU (from the scenario file), flagged with cause hardware within 60 s of
    the job's first sample, with the action to drain it; it is not imbalance."""
    run, _, report = evaluated(path)
    broken = [(f["node"], str(f["gpu"])) for f in load_yaml(path)["faults"] if f["kind"] == "gpu_defect"]
    rows = {(d["node"], d["gpu"]): d for d in report["stragglers"]}
    for node, gpu in broken:
        d = rows[(node, gpu)]
        assert d["cause"] == "hardware" and d["since_start"], d
        assert d["first_detected_s"] <= truthcheck.LATENCY_S, d
        assert d["action"] == f"drain {node}, GPU {gpu}"
        assert d["evidence"]["cause"]["explained_by"]
        assert d["score"] < 0.95          # scored against the job median, not against its own (broken) habit
    imbalanced = {(r["node"], r["gpu"]) for f in report["imbalance"] for r in f["ranks"]}
    assert not imbalanced & set(broken)


@pytest.mark.slow     # simulates whole scenarios: make test runs it, make test-fast leaves it out
@pytest.mark.parametrize("path", DEFECTS, ids=lambda p: p.stem)
def test_the_evidence_names_what_the_defect_shows(path, evaluated):
    """A thermal defect: hardware reasons and its clock below its peers', hot; the power brake: the same
    reasons at a normal temperature; a narrow PCIe link: the link, its clock as its peers'."""
    _, _, report = evaluated(path)
    for f in load_yaml(path)["faults"]:
        if f["kind"] != "gpu_defect":
            continue
        (d,) = [d for d in report["stragglers"] if (d["node"], d["gpu"]) == (f["node"], str(f["gpu"]))]
        ev = d["evidence"]["cause"]
        if f["defect"] == "pcie":
            assert ev["explained_by"] == ["pcie_link_degraded"] and ev["clock_vs_peers"] > 0.97
        else:
            assert {"clock_event_reasons", "clock_vs_peers"} <= set(ev["explained_by"])
            assert ev["clock_vs_peers"] == pytest.approx(f["clock_factor"], abs=0.03)
            assert "hw_slowdown" in ev["clock_event_reasons"]
            assert (ev["temperature_celsius"] >= cause.HOT_C) == (f["defect"] == "thermal")


@pytest.mark.slow     # simulates whole scenarios: make test runs it, make test-fast leaves it out
@pytest.mark.parametrize("path", GROUPS, ids=lambda p: p.stem)
def test_work_imbalance_stays_imbalance_with_cause_work_and_is_never_flagged(path, evaluated):
    """The GPUs of a worker group (the truth's ``imbalanced``, cause work) are imbalance with cause work,
    and none is flagged for a slowness it had since it started."""
    run, _, report = evaluated(path)
    want = {(g["node"], g["gpu"]) for g in run.truth["imbalanced"]}
    assert {g["cause"] for g in run.truth["imbalanced"]} == {"work"}
    ranks = {(r["node"], r["gpu"]): r for f in report["imbalance"] for r in f["ranks"]}
    assert want <= set(ranks)
    assert {ranks[g]["cause"] for g in want} == {"work"}
    for f in report["imbalance"]:
        assert f["cause"] == "work"
    assert not want & {(d["node"], d["gpu"]) for d in report["stragglers"] if d["since_start"]}
    for d in report["stragglers"]:     # what is flagged is a fault of the truth
        assert any((s["node"], s["gpu"]) == (d["node"], d["gpu"]) for s in run.truth["stragglers"]), d


@pytest.mark.slow     # simulates whole scenarios: make test runs it, make test-fast leaves it out
def test_each_straggler_carries_the_cause_its_fault_shows(evaluated):
    """Over the shipped scenarios: every straggler the truth requires, flagged with the truth's cause."""
    checked = 0
    for path in sorted(SCENARIOS.glob("*.yaml")):
        run, _, report = evaluated(path)
        rows = {(d["node"], d["gpu"]): d for d in report["stragglers"]}
        for s in run.truth["stragglers"]:
            if s["required"] and (s["node"], s["gpu"]) in rows:
                assert rows[(s["node"], s["gpu"])]["cause"] == s["cause"], (path.stem, s)
                checked += 1
    assert checked >= 30


@pytest.mark.slow     # simulates whole scenarios: make test runs it, make test-fast leaves it out
@pytest.mark.parametrize("path", QUIET, ids=lambda p: p.stem)
def test_fault_free_noisy_runs_have_no_hardware_finding(path, evaluated):
    _, _, report = evaluated(path)
    assert report["stragglers"] == []
    assert all(r["cause"] == "work" for f in report["imbalance"] for r in f["ranks"])


@pytest.mark.slow     # simulates whole scenarios: make test runs it, make test-fast leaves it out
def test_the_service_view_and_metrics_carry_the_cause(evaluated):
    """What ``/api/v1/jobs/{id}`` and ``/metrics`` say of the defect-thermal job at its last sample."""
    path = SCENARIOS / "defect-thermal.yaml"
    _, results, _ = evaluated(path)
    (res,) = results.values()
    view = job_view(res, LossCounters())
    (flagged,) = view.stragglers
    assert (flagged.node, flagged.gpu, flagged.cause, flagged.action) == ("node02", "5", "hardware", "drain node02, GPU 5")
    assert flagged.evidence["cause"]["explained_by"]
    samples = [s for s in job_samples(view, LossCounters()) if s.metric is cat.STRAGGLER_CAUSE]
    assert [(s.labels, s.value) for s in samples] == [(("4401", "node02", "5", "hardware"), 1.0)]


@pytest.mark.slow     # simulates whole scenarios: make test runs it, make test-fast leaves it out
def test_the_imbalance_view_and_metrics_carry_the_cause(evaluated):
    _, results, _ = evaluated(SCENARIOS / "stage-and-defect.yaml")
    (res,) = results.values()
    view = job_view(res, LossCounters())
    assert view.imbalance.cause == "work" and {r.cause for r in view.imbalance.ranks} == {"work"}
    samples = [s for s in job_samples(view, LossCounters()) if s.metric is cat.JOB_IMBALANCE_CAUSE]
    assert len(samples) == len(view.imbalance.ranks) and {s.labels[-1] for s in samples} == {"work"}


# --- the judge, one shape of evidence at a time ----------------------------------------------------

T, N = 40, 8


def _signals(**over) -> dict[str, np.ndarray]:
    """A quiet job of N GPUs for T samples: clocks at max, 70 C, every GPU holding sw_power_cap."""
    sig = {"clock": np.ones((T, N)), "temp": np.full((T, N), 70.0), "pcie": np.full((T, N), np.nan),
           "xid": np.full((T, N), np.nan), REASON_PREFIX + "sw_power_cap": np.ones((T, N))}
    sig.update(over)
    return sig


def _judge(sig, pace=0.2, otherwise="work", rows=None):
    hw = cause.hardware(sig, np.ones(T, bool))
    return cause.judge(hw, np.ones(T, bool) if rows is None else rows, 3, pace, otherwise)


def test_nothing_but_pace_is_the_fallback_cause_and_the_power_cap_never_counts():
    assert _judge(_signals())[0] == "work"
    assert _judge(_signals(), otherwise="transient")[0] == "transient"


def test_a_hardware_reason_on_most_samples_is_hardware_on_some_a_hint():
    held = np.zeros((T, N))
    held[:, 3] = 1.0
    assert _judge(_signals(**{REASON_PREFIX + "hw_power_brake_slowdown": held}))[0] == "hardware"
    some = np.zeros((T, N))
    some[: T // 4, 3] = 1.0
    found, ev = _judge(_signals(**{REASON_PREFIX + "hw_slowdown": some}))
    assert (found, ev["hinted_by"]) == ("unknown", ["clock_event_reasons"])


def test_a_clock_below_the_peers_is_hardware_only_if_it_explains_the_slowness():
    clock = np.ones((T, N))
    clock[:, 3] = 0.8                                   # log gap 0.22
    assert _judge(_signals(clock=clock), pace=0.25)[0] == "hardware"
    found, ev = _judge(_signals(clock=clock), pace=0.9)  # 2.5x slower: the clock explains a quarter of it
    assert (found, ev["hinted_by"]) == ("unknown", ["clock_vs_peers"])
    clock[:, 3] = 0.98                                  # within the job's spread of clocks
    assert _judge(_signals(clock=clock))[0] == "work"


def test_heat_alone_is_a_hint_a_narrow_link_or_an_xid_is_hardware():
    temp = np.full((T, N), 70.0)
    temp[:, 3] = 90.0
    assert _judge(_signals(temp=temp))[0] == "unknown"
    pcie = np.full((T, N), np.nan)
    pcie[:, 3] = 1.0
    assert _judge(_signals(pcie=pcie))[0] == "hardware"
    xid = np.full((T, N), np.nan)
    xid[T - 2:, 3] = 1.0
    assert _judge(_signals(xid=xid))[0] == "hardware"


def test_a_node_is_what_its_gpus_agree_on():
    assert cause.combined(["hardware"] * 8, "transient") == "hardware"
    assert cause.combined(["hardware", "transient"], "transient") == "unknown"
    assert cause.combined([], "transient") == "transient"


def test_the_quarantine_receiver_drains_for_a_hardware_straggler():
    import json

    from lockstep.alerts.quarantine import parse_notification
    body = json.dumps({"version": "4", "status": "firing", "alerts": [
        {"status": "firing", "labels": {"alertname": "GPUHardwareStraggler", "node": "node02", "gpu": "5",
                                        "job_id": "4401", "severity": "ticket"}, "annotations": {}}]}).encode()
    (req,) = parse_notification(body)
    assert (req.node, req.alertname) == ("node02", "GPUHardwareStraggler") and "gpu=5" in req.reason
