"""The GPU collector on trees written by the real simulator (``lockstep sim run``): a thermal
straggler shows on the throttled GPU only, XID 79 marks one GPU lost and counts, and NVIDIA's own
Grafana dashboard runs unchanged against a real Prometheus scraping ``lockstep exporter``."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lockstep.stack import query, start_prometheus
from tests.helpers.agent import start_exporter
from tests.helpers.gpu import scrape_until_xids, sim_collector
from tests.helpers.paths import FIXTURES, REPO

SCENARIOS = REPO / "simulator/scenarios"
LOCKSTEP = str(Path(sys.executable).parent / "lockstep")
DASHBOARD = FIXTURES / "gpu/dcgm-exporter-dashboard.json"


def values(collector, metric: str, **labels: str) -> dict[str, float]:
    """``{gpu: value}`` of one metric (with the given extra labels) in one scrape."""
    out = {}
    for sample in collector.collect():
        named = dict(zip(sample.metric.labels, sample.labels))
        if sample.metric.name == metric and all(named.get(k) == v for k, v in labels.items()):
            out[named["gpu"]] = sample.value
    return out


@pytest.fixture(scope="module")
def xid_tree(tmp_path_factory) -> Path:
    """xid.yaml run to 200 s: node03 GPU 6 logs XID 48 at 80 s and XID 79 (off the bus) at 150 s."""
    root = tmp_path_factory.mktemp("xid")
    subprocess.run([LOCKSTEP, "sim", "run", str(SCENARIOS / "xid.yaml"), "--root", str(root), "--speed", "100",
                    "--duration", "200"], check=True, capture_output=True, timeout=120)
    return root


@pytest.mark.integration
def test_xid_79_counts_and_marks_only_that_gpu_lost(xid_tree):
    collector = sim_collector(xid_tree / "node03/gpus.json")
    try:
        scrape_until_xids(collector, {(6, 48): 1, (6, 79): 1})
        up = values(collector, "lockstep_gpu_up")
        temps = values(collector, "lockstep_gpu_temperature_celsius")
        gpu6 = [s for s in collector.collect() if s.labels[:1] == ("6",)]
    finally:
        collector.close()
    assert up == {str(g): (0.0 if g == 6 else 1.0) for g in range(8)}
    assert sorted(temps) == [str(g) for g in range(8) if g != 6]
    # Lost before the agent first saw it: no UUID to report, only that it is down, its verdict (fell off
    # the bus, a critical XID) and what it logged.
    assert sorted({s.metric.name for s in gpu6}) == ["lockstep_gpu_health", "lockstep_gpu_healthy", "lockstep_gpu_up",
                                                     "lockstep_gpu_xid_errors_total"]
    assert {s.labels[1]: s.value for s in gpu6 if s.metric.name == "lockstep_gpu_health"} == {"bus": 2, "xid": 2}


@pytest.mark.integration
def test_thermal_straggler_shows_on_the_throttled_gpu_only(tmp_path):
    """thermal-straggler.yaml throttles node05 GPU 3 (clock x0.7, thermal) from 300 s to 900 s: at
    --speed 100, 6 s of wall time for the reads below, made once the throttle shows."""
    sim = subprocess.Popen([LOCKSTEP, "sim", "run", str(SCENARIOS / "thermal-straggler.yaml"), "--root",
                            str(tmp_path), "--speed", "100", "--duration", "0"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    collector = sim_collector(tmp_path / "node05/gpus.json", watch_xid=False)
    try:
        deadline = time.monotonic() + 90
        while values(collector, "lockstep_gpu_clock_event_active", reason="hw_thermal_slowdown").get("3") != 1:
            assert sim.poll() is None, sim.stderr.read().decode()
            assert time.monotonic() < deadline, "node05 GPU 3 never reported thermal slowdown"
            time.sleep(0.2)
        clocks = values(collector, "lockstep_gpu_sm_clock_hertz")
        temps = values(collector, "lockstep_gpu_temperature_celsius")
        thermal = {reason: values(collector, "lockstep_gpu_clock_event_active", reason=reason)
                   for reason in ("sw_thermal_slowdown", "hw_thermal_slowdown")}
        neighbour = sim_collector(tmp_path / "node04/gpus.json", watch_xid=False)
        neighbour_thermal = values(neighbour, "lockstep_gpu_clock_event_active", reason="hw_thermal_slowdown")
    finally:
        sim.terminate()
        sim.wait(30)
        collector.close()
    peers = [g for g in clocks if g != "3"]
    assert len(peers) == 7
    assert clocks["3"] < 0.8 * min(clocks[g] for g in peers)
    assert temps["3"] > max(temps[g] for g in peers) + 10
    assert all(thermal["hw_thermal_slowdown"][g] == 0 for g in peers)
    assert all(thermal["sw_thermal_slowdown"][g] == 0 for g in peers)
    assert set(neighbour_thermal.values()) == {0.0}


def panel_queries(dashboard: dict) -> list[str]:
    exprs = []
    def walk(panels: list) -> None:
        for panel in panels:
            walk(panel.get("panels", []))
            exprs.extend(t["expr"] for t in panel.get("targets", []) if t.get("expr"))
    walk(dashboard["panels"])
    return exprs


def variable_values(url: str, dashboard: dict) -> dict[str, str]:
    """Each query variable as Grafana expands "All" on a multi-value variable: ``(v1|v2|...)``."""
    values = {}
    for var in dashboard["templating"]["list"]:
        match = re.fullmatch(r"label_values\((\w+), *(\w+)\)", var.get("query", ""))
        if var["type"] != "query" or not match:
            continue
        metric, label = match.groups()
        found = sorted({r["metric"][label] for r in query(url, f"group by ({label}) ({metric})")})
        assert found, f"template variable ${var['name']}: {var['query']} has no values"
        # Grafana's Prometheus regex escaping: a backslash doubled inside the PromQL string literal.
        values[var["name"]] = "(" + "|".join(re.escape(v).replace("\\", "\\\\") for v in found) + ")"
    return values


def wait_for(url: str, promql: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not query(url, promql):
        assert time.monotonic() < deadline, f"{promql} returned no data within {timeout}s"
        time.sleep(0.25)


@pytest.mark.integration
def test_every_dcgm_dashboard_query_returns_data(xid_tree, tmp_path, stack):
    agents = [stack.add(start_exporter(xid_tree / node, tmp_path / node, "--gpu.metric-names=dcgm"))
              for node in ("node00", "node03")]
    config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
              "scrape_configs": [{"job_name": "lockstep-node", "static_configs": [
                  {"targets": [agent.url.removeprefix("http://")], "labels": {"node": node}}
                  for agent, node in zip(agents, ("node00", "node03"))]}]}
    prometheus = stack.add(start_prometheus(config, tmp_path / "prometheus"))
    wait_for(prometheus.url, 'count(lockstep_scrape_collector_success{collector="gpu"} == 1) == 2')
    wait_for(prometheus.url, "count(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE) == 15")  # 16 GPUs, one lost

    dashboard = json.loads(DASHBOARD.read_text())
    variables = variable_values(prometheus.url, dashboard)
    exprs = panel_queries(dashboard)
    assert len(exprs) == 8
    for expr in exprs:
        promql = re.sub(r"\$(\w+)", lambda m: variables[m.group(1)], expr)
        assert query(prometheus.url, promql), f"dashboard query returned no data: {promql}"


def test_simulated_gpu_health_faults_in_gpus_json(tmp_path):
    """The simulator's GPU-health faults as the sim backend reads them: a missing GPU is not enumerated
    (the next one takes its index), an ECC error counts and logs XID 48, a row remap is pending and logs
    XID 63; a bad outcome names the field."""
    from lockstep.exporters.toolkit.configfile import ConfigError
    from lockstep.simulator.model import Model
    from lockstep.simulator.scenario import load_scenario
    from lockstep.simulator.tree.gpus import document

    scenario = load_scenario(FIXTURES / "alerts/e2e-gpu-health.yaml")
    model = Model(scenario)
    state = next(s for s in model.states() if s.t >= 61)
    missing, ecc, remap = (document(model.topo, state, n)["gpus"] for n in range(3))
    assert [g["index"] for g in missing] == [0] and missing[0]["uuid"] == str(model.topo.identity["uuid"][1])
    assert ecc[1]["ecc"]["uncorrected"] == 2 and [e["xid"] for e in ecc[1]["xid_events"]] == [48]
    assert remap[0]["remapped_rows"] == {"correctable": 0, "uncorrectable": 1, "pending": True, "failed": False}
    assert [e["xid"] for e in remap[0]["xid_events"]] == [63]
    text = Path(scenario.file).read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("at_s: 10}", "at_s: 10, outcome: maybe}"))
    assert bad.read_text() != text
    with pytest.raises(ConfigError, match="outcome"):
        load_scenario(bad)
