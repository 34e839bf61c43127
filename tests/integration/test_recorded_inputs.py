"""The analytics inputs recorded by the TSDB (group ``lockstep.analytics-inputs`` of the generated rules)
on both backends: a real Prometheus holding a simulated run (tests/fixtures/analytics/service.yaml) with
the inputs recorded over it as a running Prometheus would have (``localcluster.backfill_rules``), and a
real VictoriaMetrics holding the same raw series (vmctl) with the inputs recorded by vmalert from the
same rule file (its replay mode). Where the recorded series are there the service reads them, one per
rank and input, and its window is the one it reduces from the raw series, bit for bit."""
from __future__ import annotations

import shutil
import subprocess
from datetime import datetime, timezone

import aiohttp
import numpy as np
import pytest
import yaml

from lockstep import localcluster
from lockstep.alerts import recording
from lockstep.alerts.settings import AlertsConfig
from lockstep.analytics.evaluation.evaluate import simulate
from lockstep.analytics.frame.inputs import INPUTS, RECORDABLE
from lockstep.analytics.prom.grid import Window
from lockstep.analytics.scoring.score import score_features
from lockstep.analytics.service.fetch import fetch_window
from lockstep.analytics.service.filling import Fill
from lockstep.analytics.service.source import PrometheusSource
from lockstep.exporters.catalog.recorded import ANALYTICS_GROUP, ANALYTICS_INPUTS, ANALYTICS_STEP, ANALYTICS_STEP_LABEL
from lockstep.stack import (
    Stack,
    http_get,
    require_binary,
    start_prometheus,
    start_victoria_metrics,
    vmctl_from_prometheus,
)
from tests.helpers.paths import FIXTURES

pytestmark = pytest.mark.integration
SCENARIO = FIXTURES / "analytics/service.yaml"
PROM_CONFIG = {"global": {"scrape_interval": "5s"}, "scrape_configs": []}
JOB = "7300"


def test_each_recorded_input_is_the_inputs_own_query_over_every_node():
    """The rule and the query the service reduces the raw series with are one expression: the recorded
    value at a step is what the raw query gives there."""
    group = next(g for g in recording.groups(AlertsConfig()) if g["name"] == ANALYTICS_GROUP)
    assert group["interval"] == "5s"
    rules = {r["record"]: r["expr"] for r in group["rules"]}
    assert rules.pop(ANALYTICS_STEP) == "vector(5)"
    assert set(rules) == set(ANALYTICS_INPUTS.values()) == {ANALYTICS_INPUTS[i.name] for i in RECORDABLE}
    for inp in RECORDABLE:
        assert rules[ANALYTICS_INPUTS[inp.name]] == inp.rule(5.0), inp.name
    # the inputs a job selects by its id keep it: the service asks for the job's own recorded series
    assert "job_id" in rules[ANALYTICS_INPUTS["collective"]].split("(")[1]
    step = next(r for r in group["rules"] if r["record"] == ANALYTICS_STEP)
    assert set(step["labels"][ANALYTICS_STEP_LABEL].split(",")) == set(ANALYTICS_INPUTS)
    slower = next(g for g in recording.groups(AlertsConfig(analytics_step="15s")) if g["name"] == ANALYTICS_GROUP)
    assert slower["interval"] == "15s" and "[30000ms]" in {r["record"]: r["expr"] for r in slower["rules"]}[
        ANALYTICS_INPUTS["tx"]]


@pytest.fixture(scope="module")
def sim():
    return simulate(SCENARIO)


def _rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture(scope="module")
def stores(sim, tmp_path_factory):
    """(Prometheus, VictoriaMetrics), each holding the run and the inputs recorded over it."""
    work = tmp_path_factory.mktemp("recorded")
    start, end = sim.start, sim.start + sim.truth["duration_s"]
    localcluster.backfill(sim.frame, work / "prom", max_block_duration="24h")
    shutil.copytree(work / "prom" / "data", work / "raw")
    group = next(g for g in recording.groups(AlertsConfig()) if g["name"] == ANALYTICS_GROUP)
    localcluster.backfill_rules([group], work / "prom", start, end)
    rules = work / "analytics-inputs.yml"
    rules.write_text(yaml.safe_dump({"groups": [group]}, sort_keys=False))
    with Stack() as stack:
        prom = stack.add(start_prometheus(PROM_CONFIG, work / "prom"))
        vm = stack.add(start_victoria_metrics(work / "vm", extra_args=[
            "-search.disableCache", "-dedup.minScrapeInterval=1ms", "-search.latencyOffset=1s"]))
        vmctl_from_prometheus(work / "raw", vm)
        replay = subprocess.run([require_binary("vmalert"), f"-rule={rules}", f"-datasource.url={vm.url}",
                                 f"-remoteWrite.url={vm.url}", f"-replay.timeFrom={_rfc3339(start - 60)}",
                                 f"-replay.timeTo={_rfc3339(end)}", "-replay.disableProgressBar",
                                 "-datasource.queryStep=0s", "-replay.rulesDelay=1s", "-remoteWrite.flushInterval=200ms",
                                 "-httpListenAddr=127.0.0.1:0"],
                                capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        assert replay.returncode == 0, replay.stderr[-3000:]
        for path in ("/internal/force_flush", "/internal/resetRollupResultCache"):
            assert http_get(vm.url + path, timeout=30)[0] == 200
        yield prom, vm


@pytest.mark.parametrize("backend", ["prometheus", "victoriametrics"])
async def test_a_window_read_from_the_recorded_inputs_is_the_one_reduced_from_the_raw_series(stores, sim, backend):
    store = dict(zip(["prometheus", "victoriametrics"], stores))[backend]
    # from the run's second step: VictoriaMetrics does not show a series at the very instant of its first sample
    window = Window(sim.start + sim.period, sim.start + sim.truth["duration_s"], sim.period)
    async with aiohttp.ClientSession() as session:
        recorded, raw = (PrometheusSource(session, store.url, 30.0, recorded_inputs=on) for on in (True, False))
        assert await recorded.recorded(window.start, window.step, "node01") == set(ANALYTICS_INPUTS)
        assert await recorded.recorded(window.start, 15.0, "node01") == set() == \
            await raw.recorded(window.start, 5.0, "node01") == await recorded.recorded(window.start, 5.0, "node99")
        fill = await Fill.start(recorded, JOB, window)
        assert {i.name for i in fill.inputs if i.recorded} == set(ANALYTICS_INPUTS)
        assert [i.name for i in fill.inputs] == [i.name for i in INPUTS]
        via_rules = await fetch_window(recorded, JOB, window, inputs=fill.inputs)
        reduced = await fetch_window(raw, JOB, window)
    assert sorted(via_rules.signals) == sorted(reduced.signals)
    for name, matrix in reduced.signals.items():
        np.testing.assert_array_equal(via_rules.signals[name], matrix, err_msg=name)
    scores = [score_features(w.features(), window.start, sim.period)[JOB] for w in (via_rules, reduced)]
    assert [(d["node"], d["gpu"]) for d in scores[0].detections] == [("node01", "3")]
    assert scores[0].loss == scores[1].loss
    np.testing.assert_array_equal(scores[0].stragglers.flagged, scores[1].stragglers.flagged)


def test_the_step_is_the_sites_and_the_service_can_be_told_not_to_read_recorded_inputs(tmp_path):
    from lockstep.alerts import config as alerts_config
    from lockstep.analytics.service.config import add_serve_flags, config_from_args

    site = tmp_path / "alerts.yaml"
    site.write_text("analytics_step: 15s\n")
    assert alerts_config.load(site).analytics_step == "15s"
    import argparse

    parser = argparse.ArgumentParser()
    add_serve_flags(parser)
    url = ["--prometheus-url", "http://127.0.0.1:9090"]
    assert config_from_args(parser.parse_args(url)).recorded_inputs is True
    assert config_from_args(parser.parse_args(url + ["--recorded-inputs", "off"])).recorded_inputs is False
