"""``roce`` collector: hw_counters of the real mlx5 capture, absent counters, congestion counters."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from lockstep.exporters.collectors.roce import RoceCollector, RoceOptions
from lockstep.exporters.toolkit.exposition import Encoder, render_text
from tests.helpers.paths import FIXTURES

SYSFS = FIXTURES / "sysfs"


def render(root: Path) -> str:
    collector = RoceCollector(RoceOptions(root))
    families: dict = {}
    try:
        Encoder().add(families, collector.collect())
    finally:
        collector.close()
    return render_text(families)


def series(text: str) -> dict[str, float]:
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line and not line.startswith("#")}


@pytest.mark.parametrize("tree", ["real", "variants/missing"])
def test_golden(tree, golden):
    golden(f"fabric/roce_{tree.replace('variants/', '')}.prom", render(SYSFS / tree))


def test_only_ports_with_hw_counters_and_only_present_counters():
    got = series(render(SYSFS / "real"))
    assert got['lockstep_roce_local_ack_timeout_errors_total{device="mlx5_0",port="1"}'] == 131
    assert got['lockstep_roce_out_of_sequence_total{device="mlx5_0",port="1"}'] == 1
    # this ConnectX-4 capture predates the congestion counters: they are absent, not zero
    assert not any("cnp" in key or "ecn" in key for key in got)
    assert {key.split('device="')[1].split('"')[0] for key in got} == {"mlx5_0"}


def test_congestion_counters(tmp_path):
    root = tmp_path / "sys"
    shutil.copytree(SYSFS / "real", root)
    hw = root / "class/infiniband/mlx5_0/ports/1/hw_counters"
    os.chmod(hw, 0o755)
    for value, name in enumerate(("np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled", "rp_cnp_ignored",
                                  "rx_icrc_encapsulated"), start=11):
        (hw / name).write_text(f"{value}\n")
    got = series(render(root))
    labels = '{device="mlx5_0",port="1"}'
    assert {name: got[f"{name}{labels}"] for name in (
        "lockstep_roce_ecn_marked_packets_total", "lockstep_roce_cnp_sent_total", "lockstep_roce_cnp_handled_total",
        "lockstep_roce_cnp_ignored_total", "lockstep_roce_icrc_errors_total")} == {
        "lockstep_roce_ecn_marked_packets_total": 11, "lockstep_roce_cnp_sent_total": 12,
        "lockstep_roce_cnp_handled_total": 13, "lockstep_roce_cnp_ignored_total": 14,
        "lockstep_roce_icrc_errors_total": 15}



def test_counter_files_that_appear_later_are_picked_up(tmp_path, monkeypatch):
    """hw_counters created after the device (the listing does not change) are found by the periodic
    rediscovery."""
    monkeypatch.setattr("lockstep.exporters.fabric.device_scan.REDISCOVER_S", 0.0)
    root = tmp_path / "sys"
    shutil.copytree(SYSFS / "real", root)
    hw = root / "class/infiniband/mlx5_0/ports/1/hw_counters"
    os.chmod(hw, 0o755)
    collector = RoceCollector(RoceOptions(root))
    assert "cnp_sent" not in "".join(str(s) for s in collector.collect())
    (hw / "np_cnp_sent").write_text("5\n")
    got = {s.metric.name: s.value for s in collector.collect()}
    assert got["lockstep_roce_cnp_sent_total"] == 5
    collector.close()
