"""The fabric collectors on trees written by ``lockstep sim run`` (the pause-storm scenario: node01, NIC
on rail 1, priority 3, 100 s-160 s): only the faulted NIC and priority shows rising pause duration and
storm events, and node_exporter agrees with lockstep on the simulated HCAs."""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from lockstep.exporters import cli
from tests.helpers.node_exporter import assert_agree, scrape_both
from tests.helpers.paths import REPO

pytestmark = pytest.mark.integration

SCENARIO = REPO / "simulator" / "scenarios" / "pause-storm.yaml"


def simulate(root: Path, duration_s: int) -> Path:
    proc = subprocess.run([sys.executable, "-m", "lockstep", "sim", "run", str(SCENARIO), "--root", str(root),
                           "--speed", "1000", "--duration", str(duration_s)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return root


def scrape(node_root: Path) -> dict[tuple, float]:
    """Every fabric sample of one simulated node, through the exporter's own flag handling."""
    parser = argparse.ArgumentParser()
    argv = [f"--sim.node-root={node_root}", "--collector.disable-defaults", "--collector.pfc",
            "--collector.infiniband"]
    cli.add_parser(parser.add_subparsers(), argv)
    config = cli.config_from_args(parser.parse_args(["exporter", *argv]))
    collectors = cli.build_collectors(config, cli.registry.load())
    try:
        return {(s.metric.name, *s.labels): s.value for c in collectors.values() for s in c.collect()}
    finally:
        for c in collectors.values():
            c.close()


def rising(before: dict, after: dict, metric: str) -> set[tuple]:
    return {key[1:] for key, value in after.items() if key[0] == metric and value > before.get(key, 0)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("pause-storm")
    # the model is deterministic in its seed: a 90 s run is the 200 s run before the storm
    return simulate(base / "before", 90), simulate(base / "after", 200)


def test_only_the_faulted_nic_and_priority_rises(runs):
    before_root, after_root = runs
    nodes = sorted(p.name for p in after_root.iterdir() if (p / "ethtool").is_dir())
    assert nodes == ["node00", "node01", "node02", "node03"]
    duration, storms, frames = {}, {}, {}
    for node in nodes:
        before, after = scrape(before_root / node), scrape(after_root / node)
        assert any(key[0] == "lockstep_pfc_pause_duration_seconds_total" for key in after), node
        duration[node] = rising(before, after, "lockstep_pfc_pause_duration_seconds_total")
        frames[node] = rising(before, after, "lockstep_pfc_pause_frames_total")
        storms[node] = rising(before, after, "lockstep_pfc_pause_storm_events_total")
        if node == "node01":
            rail = {key[1:] for key in after if key[0] == "lockstep_fabric_rail_info"}
    assert {n: d for n, d in duration.items() if d} == {"node01": {("ens41np0", "3", "rx"), ("ens41np0", "3", "tx")}}
    assert {n: f for n, f in frames.items() if f} == {"node01": {("ens41np0", "3", "rx"), ("ens41np0", "3", "tx")}}
    assert {n: s for n, s in storms.items() if s} == {"node01": {("ens41np0", "warning"), ("ens41np0", "error")}}
    assert ("mlx5_1", "ens41np0", "1") in rail  # the faulted NIC is rail 1's HCA


def test_node_exporter_agrees_on_the_simulated_hcas(runs, tmp_path):
    node, ours = scrape_both(runs[1] / "node01" / "sys", tmp_path)
    assert sum(1 for name, _ in node if name == "info") == 8
    assert_agree(node, ours)
