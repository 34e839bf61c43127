"""The fleet pass against a real Prometheus: the queries' features equal the evaluation's emulation of
them on the same simulated samples, and a planted slow GPU becomes degraded with its evidence on /metrics; with the
fleet inputs recorded over the same samples (group lockstep.fleet-inputs of the generated rules, evaluated as a
running Prometheus would have), the pass reads them and gets the same features and verdicts."""
import subprocess

import aiohttp
import numpy as np
import pytest

from lockstep.alerts import recording
from lockstep.alerts.settings import AlertsConfig
from lockstep.analytics.evaluation import fleet as emulation
from lockstep.analytics.frame.peers import WINDOW_S, info_query, queries, recorded_queries
from lockstep.analytics.scoring import peers
from lockstep.analytics.service.peers import PeerRefresher, PeerResults, frame_from, samples
from lockstep.analytics.service.source import PrometheusSource
from lockstep.exporters.catalog import fleet as cat
from lockstep.exporters.catalog import gpu as G
from lockstep.exporters.catalog.recorded import FLEET_INPUTS_GROUP
from lockstep.exporters.catalog.selectors import NODE_JOB
from lockstep.localcluster import backfill_rules
from lockstep.simulator.fleet import load_fleet, simulate_fleet
from lockstep.stack import require_binary, start_prometheus

START = 1_700_000_040.0   # a whole minute: the subquery's steps fall on the samples
RECORDED_UNTIL_S = 2400.0   # the recorded inputs cover the first 40 minutes; the windows after them read the raw series
FLEET = """name: small
seed: 5
duration_s: 4200
sample_period_s: 60
models:
  - {model: h100-sxm, nodes: 3, gpus_per_node: 8}
busy: {mean_busy_s: 1000000, mean_idle_s: 60}
faults:
  - {kind: slow, node: h100-sxm-n01, gpu: 4, clock_factor: 0.5}
"""


def openmetrics(s) -> str:
    per_gpu = {G.UTILIZATION: s.utilization, G.SM_ACTIVE: s.sm_active, G.SM_CLOCK: s.sm_clock, G.POWER: s.power,
               G.TEMPERATURE: s.temperature, G.PCIE_GEN: s.pcie_gen, G.PCIE_WIDTH: s.pcie_width}
    static = {G.SM_CLOCK_MAX: s.sm_clock_max, G.POWER_LIMIT: s.power_limit, G.PCIE_GEN_MAX: s.pcie_gen_max,
              G.PCIE_WIDTH_MAX: s.pcie_width_max}
    out = []
    for metric in list(per_gpu) + list(static) + [G.INFO]:
        out.append(f"# TYPE {metric.name} gauge")
        for col, (node, gpu) in enumerate(s.gpus):
            labels = f'job="{NODE_JOB}",node="{node}",gpu="{gpu}"'
            if metric is G.INFO:
                labels += f',uuid="GPU-{node}-{gpu}",name="{s.model[col]}",pci_bus_id="0",driver_version="{s.driver[col]}"'
            for t, when in enumerate(s.times):
                value = 1.0 if metric is G.INFO else (static[metric][col] if metric in static else per_gpu[metric][t, col])
                out.append(f"{metric.name}{{{labels}}} {float(value)!r} {START + when:.0f}")
    return "\n".join(out) + "\n# EOF\n"


class _Refusing:
    asked = 0

    async def instant(self, query, at):
        self.asked += 1
        raise AssertionError("queried")


@pytest.fixture(scope="module")
def fleet_in_prometheus(tmp_path_factory):
    work = tmp_path_factory.mktemp("peers")
    (work / "fleet.yaml").write_text(FLEET)
    s = simulate_fleet(load_fleet(work / "fleet.yaml"))
    (work / "data").mkdir()
    (work / "in.om").write_text(openmetrics(s))
    subprocess.run([require_binary("promtool"), "tsdb", "create-blocks-from", "openmetrics", "--quiet",
                    str(work / "in.om"), str(work / "data")], check=True, capture_output=True, timeout=300)
    # the fleet inputs recorded over the first 40 minutes, as the generated rules would have
    group = next(g for g in recording.groups(AlertsConfig()) if g["name"] == FLEET_INPUTS_GROUP)
    backfill_rules([group], work, START, START + RECORDED_UNTIL_S)
    prom = start_prometheus({"global": {"scrape_interval": "60s"}}, work)
    yield s, prom
    prom.stop()


@pytest.mark.integration
async def test_the_queries_compute_what_the_evaluation_emulates_and_the_slow_gpu_is_degraded(fleet_in_prometheus):
    s, prom = fleet_in_prometheus
    wins = emulation.windows(s)
    async with aiohttp.ClientSession() as session:
        source = PrometheusSource(session, prom.url, 30.0)
        fleet = PeerRefresher(source)
        ends = [e for e in wins.ends if e >= RECORDED_UNTIL_S + WINDOW_S][-4:]
        for end in ends:
            got = await fleet.refresh(START + end)
            # a refresh sooner than EVERY_S after it gives the same results and asks Prometheus nothing
            assert await PeerRefresher(_Refusing(), fleet.verdicts, got).refresh(START + end + 1) is got
            assert fleet.read_recorded is False     # the recorded inputs end 40 minutes in
        # the features Prometheus computed, against the emulation's, for the last window
        answers = {name: await source.instant(q, START + ends[-1]) for name, q in queries().items()}
        frame = frame_from(await source.instant(info_query(), START + ends[-1]), answers)
    emulated = emulation.window_features(s, ends[-1])
    assert set(queries()) == set(peers.INPUTS)
    for name in peers.INPUTS:
        np.testing.assert_allclose(frame[name].to_numpy(), emulated[name].to_numpy(), rtol=1e-6, equal_nan=True,
                                   err_msg=name)
    # a node whose job holds its GPUs at the power cap gives no clock (the cap explains it); the rest do
    assert frame["sm_clock"].notna().sum() >= 8 and np.isfinite(frame.loc[("h100-sxm-n01", "4"), "sm_clock"])
    assert frame["pcie"].notna().all()
    assert isinstance(got, PeerResults)
    bad = [r for r in got.rows if r.degraded]
    assert [(r.node, r.gpu) for r in bad] == [("h100-sxm-n01", "4")]
    assert set(bad[0].evidence) == {"sm_clock"} and bad[0].model == "NVIDIA H100 80GB HBM3"
    emitted = {(x.metric.name, x.labels): x.value for x in samples(got)}
    assert emitted[(cat.PEER_DEGRADED.name, ("h100-sxm-n01", "4", "NVIDIA H100 80GB HBM3"))] == 1.0
    assert emitted[(cat.PEER_DEGRADED.name, ("h100-sxm-n00", "4", "NVIDIA H100 80GB HBM3"))] == 0.0
    assert (cat.PEER_DEVIATION.name, ("h100-sxm-n01", "4", "NVIDIA H100 80GB HBM3", "sm_clock")) in emitted


async def test_a_failed_fleet_pass_is_not_tried_again_before_its_interval():
    """A store that cannot answer the whole fleet's queries in time is asked again after ``every_s``, not at every
    refresh beside the jobs' own queries; the last results stay served meanwhile."""
    refusing = _Refusing()
    fleet = PeerRefresher(refusing)
    with pytest.raises(AssertionError):
        await fleet.refresh(START)
    asked = refusing.asked
    assert await fleet.refresh(START + 30) is fleet.results and refusing.asked == asked
    with pytest.raises(AssertionError):
        await fleet.refresh(START + fleet.every_s)
    assert refusing.asked > asked


async def test_the_fleet_pass_waits_while_a_jobs_window_is_still_being_fetched():
    """A refresh that leaves a job's window half fetched is followed at once by the next, not by the fleet's
    queries: the job's first result comes first; the fleet pass runs once the windows are whole."""
    import asyncio
    from types import SimpleNamespace

    from lockstep.analytics.service.app import refresh_loop

    cut_short = [{"9000"}, {"9000"}, set(), set()]
    state = SimpleNamespace(fills=SimpleNamespace(cut_short=set()), peers=None)

    class Refreshing:
        def __init__(self):
            self.state, self.done = state, 0

        async def refresh(self, now):
            state.fills.cut_short = cut_short[min(self.done, len(cut_short) - 1)]
            self.done += 1

    class Fleet:
        passes_after = []

        async def refresh(self, now):
            self.passes_after.append(refresher.done)
            return "fleet"

    refresher, fleet, refreshed = Refreshing(), Fleet(), asyncio.Event()
    config = SimpleNamespace(now=lambda: START, interval_s=0.001, max_backoff_s=0.001)
    task = asyncio.create_task(refresh_loop(refresher, config, refreshed, fleet))
    try:
        while len(fleet.passes_after) < 2:
            refreshed.clear()
            await asyncio.wait_for(refreshed.wait(), timeout=30)
    finally:
        task.cancel()
    assert fleet.passes_after[:2] == [3, 4] and state.peers == "fleet"


@pytest.mark.integration
async def test_the_recorded_inputs_give_the_same_features_and_verdicts(fleet_in_prometheus):
    """Within the recorded minutes the pass reads the recorded inputs: each feature is what the raw series' subquery
    gives at the same instant, and the slow GPU is degraded all the same."""
    s, prom = fleet_in_prometheus
    ends = [e for e in emulation.windows(s).ends if WINDOW_S + 120 <= e <= RECORDED_UNTIL_S][-4:]
    async with aiohttp.ClientSession() as session:
        source = PrometheusSource(session, prom.url, 30.0)
        fleet, raw = PeerRefresher(source), PeerRefresher(source, recorded=False)
        for end in ends:
            got, want = await fleet.refresh(START + end), await raw.refresh(START + end)
            assert fleet.read_recorded is True and raw.read_recorded is False
        at = START + ends[-1]
        info = await source.instant(info_query(), at)
        recorded = frame_from(info, {n: await source.instant(q, at) for n, q in recorded_queries().items()})
        subquery = frame_from(info, {n: await source.instant(q, at) for n, q in queries().items()})
    for name in peers.INPUTS:
        assert recorded[name].notna().sum() >= 8, name
        np.testing.assert_allclose(recorded[name].to_numpy(), subquery[name].to_numpy(), rtol=1e-9, equal_nan=True,
                                   err_msg=name)
    assert [(r.node, r.gpu) for r in got.rows if r.degraded] == [(r.node, r.gpu) for r in want.rows if r.degraded] \
        == [("h100-sxm-n01", "4")]


async def test_without_recorded_inputs_over_the_window_the_raw_series_are_read():
    """The coverage answer decides: a group that ran through the window (14 of its 15 minutes at least) is read, a
    shorter or absent one is not."""
    from lockstep.analytics.frame.peers import recorded_covers

    assert recorded_covers([{"metric": {}, "value": [START, "15"]}])
    assert recorded_covers([{"metric": {}, "value": [START, "14"]}])
    assert not recorded_covers([{"metric": {}, "value": [START, "13"]}])
    assert not recorded_covers([])


def test_each_recorded_fleet_input_is_the_pass_own_expression():
    """The rule the generated rules record and the expression the pass's subqueries evaluate at each step are one
    expression, so the recorded minutes are the subquery's steps."""
    from lockstep.analytics.frame.peers import loaded, loaded_inputs
    from lockstep.exporters.catalog.recorded import FLEET_INPUTS, FLEET_INPUTS_STEP, FLEET_LOADED

    group = next(g for g in recording.groups(AlertsConfig()) if g["name"] == FLEET_INPUTS_GROUP)
    assert group["interval"] == "60s"
    rules = {r["record"]: r["expr"] for r in group["rules"]}
    assert rules.pop(FLEET_INPUTS_STEP) == "vector(60)" and rules.pop(FLEET_LOADED) == loaded()
    assert rules == {FLEET_INPUTS[name]: expr for name, expr in loaded_inputs().items()}
    assert set(FLEET_INPUTS) == set(peers.INPUTS)
