"""The peer-relative health on the shipped simulated fleet: what `make eval` reports, held as tests."""
import json

import pytest

from lockstep.analytics.evaluation.fleet import LATENCY_BUDGET_S, evaluate_fleet
from tests.helpers.paths import REPO

pytestmark = [pytest.mark.slow, pytest.mark.long(30)]
FLEETS = sorted((REPO / "simulator/scenarios/fleet").glob("*.yaml"))


@pytest.fixture(scope="module", params=FLEETS, ids=[p.stem for p in FLEETS])
def report(request):
    return evaluate_fleet(request.param, models=True)


def test_two_fleets_are_shipped():
    assert len(FLEETS) >= 2


def test_every_planted_gpu_is_degraded_with_the_right_evidence_within_30_minutes_of_load(report):
    planted = report["rule"]["planted"]
    assert {p["kind"] for p in planted} == {"slow", "hot", "downtrained"}
    for p in planted:
        assert p["latency_s"] is not None and 0 < p["latency_s"] <= LATENCY_BUDGET_S, p
        assert p["right_evidence"], p


def test_no_healthy_gpu_is_judged_degraded_over_the_fleets_days(report):
    rule = report["rule"]
    assert rule["gpu_days"] > 1000
    assert rule["false_verdicts"] == 0, rule["false_gpus"]


def test_the_models_are_weighed_on_the_same_fleet_and_the_rule_kept_unless_beaten(report):
    assert set(report["models"]) == {"robust covariance", "isolation forest"}
    for m in report["models"].values():
        assert len(m["planted"]) == len(report["rule"]["planted"])
    assert report["kept"] == "rule"
    json.dumps(report)   # the --json report is plain data
