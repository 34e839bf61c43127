"""The simulator's validation results (scenario ``validation:``): stored through the real store, served by the
node agent under --sim.node-root, a degraded link showing as a low all-reduce and a low ib_write_bw."""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from lockstep.exporters import cli
from lockstep.exporters.toolkit.configfile import ConfigError
from lockstep.simulator.scenario import parse_scenario
from lockstep.simulator.validation import ALLREDUCE_BUSBW, IB_WRITE_BW
from lockstep.validation.store import read_series, series_file
from tests.helpers.paths import FIXTURES, REPO

SCENARIO = FIXTURES / "validation" / "sim-degraded-link.yaml"


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sim-validation") / "sim"
    proc = subprocess.run([sys.executable, "-m", "lockstep", "sim", "run", str(SCENARIO), "--root", str(root),
                           "--speed", "100", "--duration", "10"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return root


def latest_and_baseline(root: Path, node: str, kind: str, test: str, scale: int, figure: str) -> tuple[float, float]:
    doc = read_series(series_file(root / "validation", node, kind, test, scale))
    return doc["latest"]["figures"][figure], doc["baseline"]["history"][figure]


@pytest.mark.integration
def test_a_degraded_link_shows_as_a_low_all_reduce_on_both_nodes_of_its_pair(root):
    nominal = 8 * ALLREDUCE_BUSBW
    for node in ("node02", "node03"):
        value, baseline = latest_and_baseline(root, node, "nccl", "all_reduce_perf", 2, "avg_busbw_bytes_per_second")
        assert value / nominal == pytest.approx(0.5, rel=0.02) and baseline / nominal == pytest.approx(1, rel=0.02)
    value, baseline = latest_and_baseline(root, "node00", "nccl", "all_reduce_perf", 2, "avg_busbw_bytes_per_second")
    assert value / baseline == pytest.approx(1, rel=0.03)
    assert read_series(root / "validation/node02/nccl/all_reduce_perf@2.json")["latest"]["nodes"] == ["node02", "node03"]


@pytest.mark.integration
def test_and_as_a_low_ib_write_bw_on_that_hca_only(root):
    bw = {hca: latest_and_baseline(root, "node03", "perftest", f"ib_write_bw/mlx5_{hca}", 1,
                                   "bw_average_bytes_per_second")[0] / IB_WRITE_BW for hca in range(8)}
    assert bw[2] == pytest.approx(0.5, rel=0.01) and all(v == pytest.approx(1, rel=0.01) for h, v in bw.items() if h != 2)


@pytest.mark.integration
def test_the_node_agent_serves_them_under_sim_node_root(root):
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers(), [])
    args = parser.parse_args(["exporter", f"--sim.node-root={root / 'node03'}", "--collector.disable-defaults",
                              "--collector.validation"])
    text = cli.build_scraper(cli.config_from_args(args), args._specs).render()
    assert 'lockstep_validation_status{kind="nccl",test="all_reduce_perf",scale="2",status="pass"} 1' in text
    assert ('lockstep_validation_bandwidth_baseline_bytes_per_second{kind="perftest",test="ib_write_bw/mlx5_2",'
            'scale="1",subject="",figure="bw_average",source="history"}') in text


def test_scenario_errors_name_the_line():
    with pytest.raises(ConfigError, match="rate_factor: must be in"):
        parse_scenario({"name": "x", "duration_s": 60, "cluster": {"nodes": 2}, "job": {"job_id": 1, "nodes": 2,
                        "step_time_s": 1}, "faults": [{"kind": "link_degraded", "node": "node01", "hca": 0,
                                                       "start_s": 0, "end_s": 10, "rate_factor": 1.5}]}, "s.yaml")
    with pytest.raises(ConfigError, match="validation.every_s"):
        parse_scenario({"name": "x", "duration_s": 60, "cluster": {"nodes": 2}, "job": {"job_id": 1, "nodes": 2,
                        "step_time_s": 1}, "validation": {"every_s": -1}}, "s.yaml")
