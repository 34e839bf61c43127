"""Every panel query on a live simulated cluster: ``lockstep sim run`` at ten times real speed,
one real node agent per simulated node, Prometheus scraping them every second.

The live agents emit what the simulator's series frame does not hold: rail mapping, P2P and PCIe
checks, ECC/row-remap/NVLink counters, NFS RPC and disk statistics, collector health. A third
agent (target label node99) reads node01's tree with an unreadable GPU state file, so a collector
really fails, and expects 800 Gb/s links where the simulator's run at 400, so its links are degraded.
Prometheus evaluates the alerts' recording rules every second, so the panels built on them have data.
"""
from __future__ import annotations

import dataclasses
import time
import warnings

import pytest

from lockstep import localcluster
from lockstep.alerts import build, config
from lockstep.dashboards import check
from lockstep.dashboards.build import build_all
from lockstep.stack import start_prometheus
from tests.helpers import validation_results
from tests.helpers.paths import FIXTURES

pytestmark = pytest.mark.integration

SCENARIO = FIXTURES / "dashboards" / "live.yaml"
# Scraped every second: a 4 s rate window holds four samples, as $__rate_interval would.
VALUES = {"datasource": "prometheus", "job_id": "4242", "node": "node0[01]|node99", "instance": ".*", "rail": ".*",
          "system": ".*", "__rate_interval": "4s", "__interval": "1s", "__range": "20s", "__range_s": "20"}
# What the live run must show before the panels are queried (the XID 79 at 30 s simulated time).
READY = ("lockstep_gpu_up == 0", 'lockstep_scrape_collector_success{collector="gpu"} == 0',
         "lockstep_ib_port_state != 4", "rate(lockstep_pfc_pause_storm_events_total[4s]) > 0",
         "lockstep_ib_port_link_degraded == 1", "lockstep:pfc_paused:ratio > 0")
# Recorded series the dashboards use that the live run must hold (no analytics or power exporter runs).
RECORDED = {"lockstep:pfc_paused:ratio", "lockstep:pfc_storm_events:increase", "lockstep:job_gpus:count",
            "lockstep:gpu_sm_clock:ratio", "lockstep:validation_figure:baseline_ratio"}


def wait_for(url: str, exprs: tuple[str, ...], timeout: float = 40.0) -> None:
    deadline = time.monotonic() + timeout
    pending = list(exprs)
    while pending and time.monotonic() < deadline:
        pending = [e for e in pending if not check.run(url, check.PanelQuery("-", "-", "-", e, True), 0, time.time(), 1)]
        time.sleep(0.5)
    assert not pending, f"the live run never showed: {pending}"


def test_panel_queries_on_a_live_simulated_cluster(tmp_path, stack):
    root = tmp_path / "root"
    localcluster.start_sim(SCENARIO, root, stack, speed=10)
    validation_results.fill(tmp_path / "validation", ["node00", "node01"], degraded="node01", failing="node01")
    results = f"--validation.results-dir={tmp_path / 'validation'}"
    agents = localcluster.start_node_agents(root, stack, extra_args=["--infiniband.expected-rate=mlx5_*=400", results])
    bad = tmp_path / "bad-gpus.json"
    bad.write_text('{"version": 1, "gpus": [')  # truncated: the GPU collector fails on every scrape
    broken = localcluster.start_node_agents(root, stack, nodes=["node01"], extra_args=[
        f"--gpu.backend=sim:{bad}", "--infiniband.expected-rate=mlx5_*=800", results])
    targets = {node: localcluster.host_port(a) for node, a in agents.items()}
    targets["node99"] = localcluster.host_port(broken["node01"])
    # Two GPU nodes answer NVML here (node99's GPU collector fails): peer baselines from two of them.
    cfg = config.load(None)
    cfg = dataclasses.replace(cfg, evaluation_interval="1s",
                              thresholds=dataclasses.replace(cfg.thresholds, validation_min_peers=2))
    build.write(cfg, tmp_path / "rules")
    rules = [tmp_path / "rules" / build.RULES_FILE]
    prom = stack.add(start_prometheus(localcluster.prometheus_config(targets, scrape_interval="1s", rule_files=rules),
                                      tmp_path / "prom"))
    start = time.time()
    wait_for(prom.url, READY)
    time.sleep(5)  # a few more scrapes so every rate window after the faults is filled
    end = time.time()
    present = check.present_metrics(prom.url, end)
    empty, absent = check.data_check(prom.url, check.panel_queries(build_all(), VALUES), start, end, 1, present)
    assert empty == []
    assert {"lockstep_fabric_rail_info", "lockstep_gpu_p2p_status", "lockstep_nfs_rpc_rtt_seconds_total"} <= present
    assert RECORDED <= present
    stats = {q.panel: check.run(prom.url, q, start, end, 1) for q in check.panel_queries(build_all(), VALUES)
             if q.panel in ("Collectors failing", "Links degraded", "Throughput per rail", "GPUs failing a check",
                            "GPUs missing")}
    assert stats["Collectors failing"][0]["values"][-1][1] == "1"   # node99's GPU collector
    assert stats["GPUs failing a check"][0]["values"][-1][1] == "1"   # the GPU lost to XID 79: check bus
    assert stats["GPUs missing"][0]["values"][-1][1] == "0"           # 8 expected, 8 enumerated (one lost)
    # node99's eight ports run at 400 Gb/s against an expected 800 (mlx5_4 may be down mid-flap).
    assert stats["Links degraded"][0]["values"][-1][1] in ("7", "8")
    assert {r["metric"]["rail"] for r in stats["Throughput per rail"]} == {str(i) for i in range(8)}
    if absent:
        warnings.warn(f"not served by the live node agents (see tests/dashboards/test_queries.py): {sorted(absent)}",
                      stacklevel=1)
