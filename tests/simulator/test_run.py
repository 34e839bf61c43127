"""``lockstep sim run`` as a real process: trees, cluster.json, power-exporter.yaml, a Redfish
service on an ephemeral port, files matching the series at the same tick, clean stop on SIGTERM."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from lockstep.exporters.catalog import gpu as gpu_metrics
from lockstep.exporters.toolkit.configfile import Section, load_yaml
from lockstep.simulator.scenario import load_scenario
from lockstep.simulator.series import series_frame
from tests.helpers.paths import REPO

pytestmark = pytest.mark.integration

SCENARIOS = REPO / "simulator" / "scenarios"
LAUNCH = "import sys; from lockstep.cli import main; sys.exit(main())"


def wait_for(predicate, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (value := predicate()):
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_sim_run_serves_writes_and_stops_cleanly(tmp_path: Path) -> None:
    scenario = SCENARIOS / "pause-storm.yaml"
    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, "sim", "run", str(scenario), "--root", str(tmp_path),
                             "--speed", "50", "--duration", "0", "--redfish-listen", "127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        banner = "".join(proc.stdout.readline() for _ in range(5))
        assert "power cfg:" in banner and str(tmp_path) in banner, banner
        cluster = json.loads((tmp_path / "cluster.json").read_text())
        assert [n["name"] for n in cluster["nodes"]] == ["node00", "node01", "node02", "node03"]
        config = Section(load_yaml(tmp_path / "power-exporter.yaml"), tmp_path / "power-exporter.yaml")
        targets = {t.get("name", str): t.data for t in config.sections("targets")}
        assert {t["kind"] for t in targets.values()} == {"bmc", "pdu", "cdu"}
        assert targets["r1-pdu"]["budget_watts"] == 60000 and targets["node03"]["rack"] == "r2"
        url = targets["node02"]["url"] + "/redfish/v1/Chassis/1/Power"
        with urllib.request.urlopen(url, timeout=5) as resp:
            assert json.load(resp)["PowerControl"][0]["PowerConsumedWatts"] > 2000
        # simulated time runs 50x: a few wall seconds cover the storm at 100-160 s
        gpus_json = tmp_path / "node01" / "gpus.json"
        doc = wait_for(lambda: (d := json.loads(gpus_json.read_text()))["timestamp"] - cluster["start_timestamp"] >= 200 and d)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err
    assert "stopped" in err
    # the live numbers are the series numbers at the same tick
    t = doc["timestamp"] - cluster["start_timestamp"]
    frame = series_frame(load_scenario(scenario))
    at = frame[(frame.timestamp == frame.timestamp.min() + t) & (frame.node == "node01")]
    energy = at[at.metric == gpu_metrics.ENERGY.name].set_index("gpu")["value"]
    assert [energy[str(g["index"])] for g in doc["gpus"]] == [g["energy_mj"] / 1000 for g in doc["gpus"]]
