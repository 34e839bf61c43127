"""The goodput ledger: every allocated GPU-second of a job productive or lost to exactly one kind and cause.

Against the simulator's own ledger (simulator/job.py books each tick by kind and cause: the truth's
``ledger``), never against the scorer's output; the sums are checked against the allocation the
scenario file implies (GPUs × accounted seconds). The service's counters keep the sum exact across
windows, a gap caught up after an outage, and a replica resuming them from Prometheus.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lockstep.analytics.evaluation.emulate import Answers
from lockstep.analytics.evaluation.evaluate import simulate
from lockstep.analytics.evaluation.truthcheck import NOISY_FLOOR, NOISY_TOLERANCE
from lockstep.analytics.prom.errors import PrometheusError
from lockstep.analytics.prom.grid import Window
from lockstep.analytics.service.config import Shard
from lockstep.analytics.service.metrics import job_samples
from lockstep.analytics.service.refresh import Refresher
from lockstep.analytics.service.resume import counters_by_job
from lockstep.exporters.catalog import analytics as cat
from lockstep.exporters.catalog.enums import LEDGER
from lockstep.exporters.toolkit.configfile import load_yaml
from tests.helpers.paths import REPO

pytestmark = pytest.mark.long(30)

SCENARIOS = REPO / "simulator/scenarios"
# one scenario per kind of the ledger at least: stalls of every cause and stragglers, idle, slowdowns,
# imbalance, GPUs broken from the start, a lost member, transient stragglers, none at all
COVER = ["thermal-straggler", "restart", "input-starvation", "fabric-slowdown", "power-cap", "groups",
         "stage-and-defect", "defect-pcie", "member-lost", "transients", "quiet-2"]


def _total(book: dict) -> float:
    return sum(v for by_cause in book.values() for v in by_cause.values())


@pytest.fixture(scope="module", params=COVER)
def evaluated(request, evaluation):
    path = SCENARIOS / f"{request.param}.yaml"
    run, results, report = evaluation.evaluate(path)
    return load_yaml(path), run, report


@pytest.mark.slow     # simulates whole scenarios: make test runs it, make test-fast leaves it out
def test_the_ledger_sums_to_the_allocated_gpu_seconds(evaluated):
    """The scenario's GPUs × the seconds after its first sample: the ledger's kinds sum to it."""
    sc, _, report = evaluated
    gpus = (sc["job"]["nodes"] if isinstance(sc["job"]["nodes"], int) else len(sc["job"]["nodes"])) * \
        sc["cluster"].get("gpus_per_node", 8)
    want = gpus * sc["duration_s"]
    assert report["ledger"]["allocated_gpu_seconds"] == want
    assert _total(report["ledger"]["gpu_seconds"]) == pytest.approx(want, rel=1e-12)
    assert set(report["ledger"]["gpu_seconds"]) == set(LEDGER)
    assert all(v >= 0 for by_cause in report["ledger"]["gpu_seconds"].values() for v in by_cause.values())


@pytest.mark.slow     # simulates whole scenarios: make test runs it, make test-fast leaves it out
def test_each_kind_and_cause_is_within_tolerance_of_the_truth(evaluated):
    """The same tolerance as the loss account on noisy scenarios (truthcheck.check_loss)."""
    _, run, report = evaluated
    want, got = run.truth["ledger"]["gpu_seconds"], report["ledger"]["gpu_seconds"]
    allocated = run.truth["ledger"]["allocated_gpu_seconds"]
    assert _total(want) == pytest.approx(allocated, abs=0.01)     # the truth rounds each entry to a millisecond
    for kind, by_cause in want.items():
        for cause, expected in by_cause.items():
            err = abs(got[kind][cause] - expected)
            assert err <= max(NOISY_TOLERANCE * expected, NOISY_FLOOR * allocated), (kind, cause, got[kind][cause],
                                                                                      expected)


@pytest.mark.slow     # simulates whole scenarios: make test runs it, make test-fast leaves it out
def test_a_restart_is_an_idle_allocation_not_a_hang(evaluation):
    """restart.yaml: the job's processes are gone from 400 s to 520 s, its 32 GPUs allocated and idle."""
    run, _, report = evaluation.evaluate(SCENARIOS / "restart.yaml")
    assert {s["cause"] for s in report["stalls"]} == {"checkpoint"}
    assert report["ledger"]["gpu_seconds"]["idle"][""] == pytest.approx(32 * 120, rel=0.05)


# --- the service's counters ----------------------------------------------------------------------

class Source:
    """Answers as Prometheus would over a simulated run (``emulate``), or raises while ``unreachable``
    (the service cut off from it); samples in ``lost`` are not in it (Prometheus itself was down)."""

    def __init__(self, run, unreachable=(0.0, 0.0), lost=(0.0, 0.0)) -> None:
        frame = run.frame[~run.frame["timestamp"].between(*lost, inclusive="neither")] if lost[1] > lost[0] else run.frame
        self.answers = Answers(frame)
        self.job, self.unreachable, self.now = str(run.truth["jobs"][0]["job_id"]), unreachable, 0.0

    def _check(self) -> None:
        if self.unreachable[0] <= self.now < self.unreachable[1]:
            raise PrometheusError("connection refused")

    async def list_jobs(self, at: float, lookback_s: float = 0.0) -> list[str]:
        self._check()
        return [self.job]

    async def series(self, inp, job_id: str, window: Window, nodes: tuple[str, ...]):
        self._check()
        return self.answers.block(inp, window, job_id, nodes)

    async def resume(self, job_ids: list[str], at: float) -> dict:
        return {}


class Settings:
    window_s, step_s, shard, refetch_steps = 300.0, 5.0, Shard(0, 1), 1


async def _serve(run, every: float, **outage) -> Refresher:
    source = Source(run, **outage)
    refresher = Refresher(source, Settings())
    t = run.start + 300.0
    while t <= run.start + run.truth["duration_s"]:
        source.now = t
        try:
            await refresher.refresh(t)
        except PrometheusError as exc:
            refresher.failed(exc)
        t += every
    return refresher


@pytest.fixture(scope="module")
def starving():
    return simulate(SCENARIOS / "input-starvation.yaml")


@pytest.mark.slow     # simulates whole scenarios: make test runs it, make test-fast leaves it out
async def test_the_services_ledger_sums_to_what_it_allocated_through_an_outage_and_its_catch_up(starving):
    """Refreshed every minute over the input starvation; the service cut off from Prometheus for 12
    minutes, of which Prometheus itself was down (no samples) for the first 4: the gap is caught up
    window by window, the part without data passed over. The ledger sums to what was accounted, which
    is the run less the samples that never were, and books the slowdown as a run without the outage does."""
    start = starving.start
    whole = await _serve(starving, 60.0)
    cut = await _serve(starving, 60.0, unreachable=(start + 700, start + 1420), lost=(start + 700, start + 940))
    (job,) = whole.state.losses
    a, b = whole.state.losses[job], cut.state.losses[job]
    for counters in (a, b):
        assert _total(counters.ledger) == pytest.approx(counters.allocated, rel=1e-12, abs=1e-6)
    assert a.allocated == 32 * (starving.truth["duration_s"] - 5.0)       # from the first window's second sample
    missing = 32 * 235.0                     # 700 < t < 940: 47 samples that Prometheus never had
    assert b.allocated == pytest.approx(a.allocated - missing, abs=32 * 5.0)
    slowed = starving.truth["ledger"]["gpu_seconds"]["slowdown"]["storage"]
    assert a.ledger["slowdown"]["storage"] == pytest.approx(slowed, rel=0.2)
    assert b.ledger["slowdown"]["storage"] == pytest.approx(slowed - 32 * 235.0 * 0.2, rel=0.25)


def test_a_replica_resuming_the_exported_ledger_keeps_it_summing_to_the_allocation():
    """The counters as /metrics exports them, read back as Prometheus answers an instant query."""
    from lockstep.analytics.service.state import LossCounters
    from lockstep.analytics.service.views import BALANCED, STEADY, JobView, StallView, loss_view

    counters = LossCounters(accounted_until=1.0e9, allocated=1234.567891)
    counters.ledger["stall"]["network"] = 100.1234567
    counters.ledger["slowdown"]["storage"] = 33.3333333
    counters.ledger["productive"][""] = counters.allocated - 100.1234567 - 33.3333333
    view = JobView("4242", 1.0e9, (), (), (), StallView(False, None, None, {}), loss_view(counters), BALANCED, STEADY)
    samples = job_samples(view, counters)
    booked = [s for s in samples if s.metric is cat.JOB_LEDGER_GPU_SECONDS]
    assert sum(s.value for s in booked) == pytest.approx(counters.allocated, rel=1e-15)
    vector = [{"metric": {"__name__": s.metric.name, "job": "lockstep-analytics", "instance": "a:9842",
                          **{k: v for k, v in zip(s.metric.labels, s.labels) if v != ""}},   # an empty label is absent
               "value": [1.0e9, repr(s.value)]} for s in samples]
    resumed = counters_by_job(vector)["4242"]
    assert resumed.ledger == counters.ledger and resumed.allocated == counters.allocated
    assert _total(resumed.ledger) == pytest.approx(resumed.allocated, rel=1e-15)


def test_counters_exported_before_the_ledger_resume_as_productive():
    vector = [{"metric": {"__name__": name, "job_id": "7"}, "value": [1.0, value]}
              for name, value in ((cat.JOB_ACCOUNTED_UNTIL.name, "100"), (cat.JOB_ALLOCATED_GPU_SECONDS.name, "640"))]
    vector.append({"metric": {"__name__": cat.JOB_LOST_GPU_SECONDS.name, "job_id": "7", "cause": "hang"},
                   "value": [1.0, "40"]})
    resumed = counters_by_job(vector)["7"]
    assert resumed.ledger["productive"][""] == 640.0 and _total(resumed.ledger) == 640.0


# --- the monthly review's table -----------------------------------------------------------------

def test_the_monthly_table_of_where_gpu_hours_went():
    """Two hours of a job: its ledger counters rising at known rates (productive 25 GPU-s/s, a stall on
    network 4 for the second hour, a slowdown on storage 1 all along, idle with no cause label)."""
    from lockstep.analytics.report.tables import ledger

    times = np.arange(0, 7201, 300.0)
    rows = []
    for kind, cause, rate in (("productive", None, 25.0), ("stall", "network", 4.0), ("slowdown", "storage", 1.0),
                              ("idle", None, 2.0)):
        values = rate * (np.clip(times - 3600, 0, None) if kind == "stall" else times)
        rows += [{"timestamp": t, "cluster": "c1", "job_id": "9", "kind": kind, "cause": cause, "value": v}
                 for t, v in zip(times, values)]
    table = ledger(pd.DataFrame(rows)).set_index(["kind", "cause"])
    hours = {("productive", ""): 50.0, ("stall", "network"): 4.0, ("slowdown", "storage"): 2.0, ("idle", ""): 4.0}
    assert table["gpu_h"].to_dict() == pytest.approx(hours)
    assert table["share"].sum() == pytest.approx(1.0) and table.index[0] == ("productive", "")
