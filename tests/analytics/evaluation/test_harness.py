"""``lockstep analytics evaluate --all``'s new figures: cause accuracy per finding kind, job-wide
slowdowns, the goodput ledger (per kind and cause against the truth, its sum against the allocation,
also through the service's refresh across a Prometheus outage) and false findings on fault-free runs.

What each figure must be follows from the scenario files copied here: a GPU broken before the job, a
slowed job, a noisy fault-free run, worker groups, a run with an outage."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from lockstep.cli import main
from tests.helpers.paths import REPO

SCENARIOS = ("defect-thermal", "input-starvation", "quiet-2", "subtle-groups", "outage")

# make eval's summary over simulated scenarios: make test runs it, make test-fast leaves it out
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def summary(tmp_path_factory, evaluation):
    from lockstep.analytics.evaluation import harness
    directory = tmp_path_factory.mktemp("scenarios")
    for name in SCENARIOS:
        (directory / f"{name}.yaml").write_text((REPO / "simulator/scenarios" / f"{name}.yaml").read_text())
    rows = harness.run_all(directory, evaluator=evaluation.evaluate)
    return directory, rows, harness.summarize(rows)


def test_cause_accuracy_per_finding_kind(summary):
    """One broken GPU (a required straggler, cause hardware), the worker groups' GPUs (imbalance, work),
    the input starvation and the outage run's slowdown (required, storage): each with its cause."""
    _, _, s = summary
    acc = s["cause_accuracy"]
    assert acc["straggler"]["findings"] == 2 and acc["straggler"]["accuracy"] == 1.0   # + the outage run's throttle
    assert acc["imbalance"]["findings"] == 16 and acc["imbalance"]["accuracy"] == 1.0  # subtle-groups: 16 GPUs
    assert acc["slowdown"] == {"findings": 2, "accuracy": 1.0}
    assert s["slowdowns"]["recall"] == 1.0 and s["slowdowns"]["latency_s_max"] <= 120.0
    assert s["slowdowns"]["gpu_seconds_error_max"] <= 0.2


def test_the_ledger_per_kind_and_cause_and_its_sum(summary):
    _, rows, s = summary
    assert s["ledgers_checked"] == len(SCENARIOS) + 1           # with the outage run's service replay
    assert s["ledger_sum_error_max"] < 1e-6
    for key, r in s["ledger"].items():
        ok, n = map(int, r["within_tolerance"].split("/"))
        assert ok == n == len(SCENARIOS), key
    assert {"productive", "checkpoint/checkpoint", "straggler/hardware", "slowdown/storage", "imbalance/work"} <= set(s["ledger"])


def test_the_outage_run_is_replayed_through_the_service(summary):
    """outage.yaml: Prometheus unreachable from 700 s to 1300 s, down (samples lost) for the first 240 s:
    the service accounts the run less the lost samples, and its ledger sums to that."""
    _, rows, s = summary
    (replayed,) = [r["replay"] for r in rows if "replay" in r]
    assert replayed["sum_error"] < 1e-6 and replayed["ledger_sum"] == pytest.approx(replayed["allocated"])
    # from the first window's second sample (t = 5 s: its first closes an interval before the data) to the
    # end, less the 47 samples Prometheus never had (700 s < t < 940 s)
    assert replayed["allocated"] == pytest.approx(32 * (1800.0 - 5.0 - 235.0), abs=32 * 5.0)
    assert replayed["slowdown_gpu_seconds"]["storage"] > 0


def test_false_findings_per_1000_gpu_hours_on_fault_free_noisy_runs(summary):
    """quiet-2 and subtle-groups have no fault (worker groups are the noise's), the others have some."""
    from lockstep.exporters.toolkit.configfile import load_yaml
    _, _, s = summary
    hours = 0.0
    for name in ("quiet-2", "subtle-groups"):
        sc = load_yaml(REPO / "simulator/scenarios" / f"{name}.yaml")
        hours += sc["job"]["nodes"] * sc["cluster"]["gpus_per_node"] * sc["duration_s"] / 3600
    assert s["fault_free_gpu_hours"] == pytest.approx(hours, rel=0.01)
    assert s["false_findings_per_1000_gpu_hours"] == {"stragglers": 0.0, "slowdowns": 0.0, "hardware": 0.0}


def test_the_text_summary_prints_them(summary, capsys, monkeypatch):
    from lockstep.analytics.evaluation import harness
    directory, rows, _ = summary
    asked = []

    def run_all(path, models=False):
        """What harness.run_all answered the fixture for this directory (scoring it again, the outage run's
        replay included, would only repeat it): a fresh copy per call, and the command's arguments kept."""
        asked.append((Path(path), models))
        return copy.deepcopy(rows)

    monkeypatch.setattr(harness, "run_all", run_all)
    assert main(["analytics", "evaluate", "--all", str(directory)]) == 0
    text = capsys.readouterr().out
    for line in ("cause acc", "job-wide slowdowns: 2/2", "ledger entry", "ledger sum vs allocation",
                 "false findings on fault-free noisy runs"):
        assert line in text
    assert main(["analytics", "evaluate", "--all", str(directory), "--json"]) == 0
    assert "cause_accuracy" in json.loads(capsys.readouterr().out)["summary"]
    assert asked == [(directory, False), (directory, False)]
