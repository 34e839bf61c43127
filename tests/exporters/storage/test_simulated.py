"""The storage collectors on a live simulated node (`lockstep sim run`): the checkpoint scenario's
write bursts show up in the Lustre write bytes, and every storage source of the node is read."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import MappingProxyType

import pytest

from lockstep.exporters import registry
from lockstep.exporters.catalog import storage
from lockstep.exporters.config import ExporterConfig
from tests.helpers.exporter_args import exporter_config
from tests.helpers.paths import REPO

pytestmark = pytest.mark.integration

SCENARIO = REPO / "simulator/scenarios/checkpoint.yaml"  # checkpoints block 100-130 s and 200-230 s
# 300 simulated seconds in 12 s: a tick every 0.2 s, so a window of 5 ticks survives a test process
# stalled for half a second on a loaded machine.


def lustre_stats(node: Path) -> Path | None:
    found = sorted((node / "proc/fs/lustre/llite").glob("*/stats"))
    return found[0] if found else None


def observe(root: Path, proc: subprocess.Popen, private: Path) -> list[tuple[float, float, tuple]]:
    """(simulated seconds, write bytes, labels) each time node00's llite stats change. Each observed
    file is copied once into a private procfs tree, so the time and the bytes come from one version."""
    seen: dict[float, tuple[float, tuple]] = {}
    start = None
    collector = None
    while proc.poll() is None:
        stats = lustre_stats(root / "node00")
        if stats is None or not (root / "cluster.json").exists():
            time.sleep(0.02)
            continue
        if collector is None:
            start = json.loads((root / "cluster.json").read_text())["start_timestamp"]
            target = private / "fs/lustre/llite" / stats.parent.name / "stats"
            target.parent.mkdir(parents=True)
            shutil.copy(root / "node00/proc/self/mounts", private / "self/mounts")
            collector = registry.load()["lustre"].factory(ExporterConfig(procfs=private, sysfs=private / "none",
                                                                         flags=MappingProxyType({})))
        text = stats.read_text()
        t = float(text.split()[1]) - start  # snapshot_time: the simulated clock
        if t not in seen:
            target.write_text(text)
            # like a real client, llite stats leave out entries with no samples yet (write_bytes
            # before the first write): absent, not zero
            for sample in (s for s in collector.collect() if s.metric is storage.WRITE_BYTES):
                seen[t] = (sample.value, sample.labels)
        time.sleep(0.01)
    return sorted((t, v, labels) for t, (v, labels) in seen.items())


def rate(points: list[tuple[float, float, tuple]], lo: float, hi: float) -> float:
    inside = [(t, v) for t, v, _ in points if lo <= t <= hi]
    assert len(inside) >= 2, f"fewer than 2 of the 5 ticks in {lo}-{hi} s observed: {inside}"
    (t0, v0), (t1, v1) = inside[0], inside[-1]
    return (v1 - v0) / (t1 - t0)


def test_checkpoint_bursts_in_lustre_write_bytes_on_a_sim_node(tmp_path):
    root, private = tmp_path / "sim", tmp_path / "proc"
    (private / "self").mkdir(parents=True)
    proc = subprocess.Popen([sys.executable, "-m", "lockstep", "sim", "run", str(SCENARIO), "--root", str(root),
                             "--speed", "25", "--redfish-listen", "127.0.0.1:0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        points = observe(root, proc, private)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode in (0, -9), proc.stderr.read().decode()
    assert len(points) > 20
    assert points[0][2] == ("/lustre", "lustre", "scratch")  # mount point resolved from the sim's mount table
    quiet = rate(points, 35, 95)
    for lo, hi in ((105, 125), (205, 225)):
        assert rate(points, lo, hi) > 20 * max(quiet, 1.0), (lo, hi, rate(points, lo, hi), quiet)
    assert rate(points, 240, 295) < rate(points, 205, 225) / 20
    # the node's other storage sources, read where the simulator left them
    config = exporter_config(f"--sim.node-root={root / 'node00'}")
    names = {name: {s.metric.name for s in registry.load()[name].factory(config).collect()}
             for name in ("nfs", "disk")}
    assert {"lockstep_storage_read_bytes_total", "lockstep_nfs_rpc_rtt_seconds_total"} <= names["nfs"]
    assert {"lockstep_disk_written_bytes_total", "lockstep_disk_io_time_seconds_total"} <= names["disk"]
