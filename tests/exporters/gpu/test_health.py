"""The per-GPU verdict (lockstep_gpu_health / _healthy) and the node's expected/visible GPU counts."""
from __future__ import annotations

import dataclasses
import os
import stat

import pynvml
import pytest

from lockstep.exporters.gpu import health
from lockstep.exporters.gpu.backend import GpuOptions, parse_duration, parse_expected
from lockstep.exporters.gpu.collector import GpuCollector
from lockstep.exporters.gpu.expected import parse_slurm_gres
from lockstep.exporters.gpu.snapshot import GpuSnapshot, GpuStatic, NvLinkCounters
from tests.helpers.gpu import ULL, fake, h100, render, wait_for_xids

STATIC = GpuStatic(0, "GPU-0", "NVIDIA H100 80GB HBM3", "00000000:18:00.0", pcie_width_max=16)


def checks(**snapshot) -> dict[str, int]:
    return health.HealthTracker().verdict(GpuSnapshot(STATIC, **snapshot), 0.0, None)


@pytest.mark.parametrize("snapshot, check, level", [
    ({"ecc_uncorrected": 0}, "ecc_uncorrectable", 0), ({"ecc_uncorrected": 1}, "ecc_uncorrectable", 2),
    ({"remapped_pending": 0, "remapped_failed": 0}, "row_remap", 0),
    ({"remapped_pending": 1, "remapped_failed": 0}, "row_remap", 1),
    ({"remapped_pending": 0, "remapped_failed": 1}, "row_remap", 2),
    ({"retired_sbe": 14, "retired_dbe": 0, "retired_pending": 0}, "retired_pages", 0),
    ({"retired_sbe": 10, "retired_dbe": 5, "retired_pending": 0}, "retired_pages", 1),
    ({"retired_sbe": 0, "retired_dbe": 0, "retired_pending": 1}, "retired_pages", 1),
    ({"retired_sbe": 60, "retired_dbe": 3, "retired_pending": 0}, "retired_pages", 2),
    ({"clock_event_reasons": 0x1 | 0x4}, "thermal", 0), ({"clock_event_reasons": 0x40}, "thermal", 1),
    ({"clock_event_reasons": 0x20}, "thermal", 1),
    ({"persistence_mode": 1}, "driver", 0), ({"persistence_mode": 0}, "driver", 1),
    ({"pcie_width": 16}, "pcie", 0), ({"pcie_width": 8}, "pcie", 1),
])
def test_check_levels(snapshot, check, level):
    assert checks(**snapshot)[check] == level


def test_checks_without_inputs_are_absent_not_ok():
    assert checks() == {"bus": 0}


def test_pcie_replay_rate_over_dcgm_limit_warns():
    tracker = health.HealthTracker()

    def replays(n: int) -> GpuSnapshot:
        return GpuSnapshot(STATIC, pcie_width=16, pcie_replay=n)

    assert tracker.verdict(replays(100), 0.0, None)["pcie"] == 0
    assert tracker.verdict(replays(108), 60.0, None)["pcie"] == 0    # 8 a minute: DCGM's limit, not over it
    assert tracker.verdict(replays(117), 120.0, None)["pcie"] == 1   # 9 a minute
    assert tracker.verdict(replays(117), 180.0, None)["pcie"] == 0


def test_nvlink_errors_growing_warn_and_a_link_going_down_fails():
    tracker = health.HealthTracker()

    def link(name: str, recovery: int = 0, crc: int = 0) -> NvLinkCounters:
        return NvLinkCounters(name, 0, recovery, crc, 0)

    def snap(*links: NvLinkCounters) -> GpuSnapshot:
        return GpuSnapshot(STATIC, nvlink=links)

    assert tracker.verdict(snap(link("total"), link("0"), link("1")), 0.0, None)["nvlink"] == 0
    assert tracker.verdict(snap(link("total", crc=999), link("0", crc=999), link("1")), 10.0, None)["nvlink"] == 0
    assert tracker.verdict(snap(link("total", crc=1999), link("0", crc=1999), link("1")), 20.0, None)["nvlink"] == 1
    assert tracker.verdict(snap(link("total", 1, 1999), link("0", 1, 1999), link("1")), 30.0, None)["nvlink"] == 1
    assert tracker.verdict(snap(link("total", 1, 1999), link("1")), 40.0, None)["nvlink"] == 2   # link 0 inactive
    assert tracker.verdict(snap(link("total", 1, 1999), link("1")), 50.0, None)["nvlink"] == 2   # and stays down


def test_uncorrectable_ecc_fails_the_gpu_through_the_collector():
    dev = h100(1)
    dev["fields"] = {**dev["fields"], pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL: (ULL, 2)}
    collector = GpuCollector(fake.FakeNvml([h100(0), dev]), None, GpuOptions("nvml", expected_count=8),
                             watch_xid=False)
    text = render(collector)
    collector.close()
    assert 'lockstep_gpu_health{gpu="1",check="ecc_uncorrectable"} 2' in text
    assert 'lockstep_gpu_healthy{gpu="1"} 0' in text and 'lockstep_gpu_healthy{gpu="0"} 1' in text
    assert "lockstep_node_gpus_visible 2" in text and "lockstep_node_gpus_expected 8" in text


def test_slurm_gres_counts():
    # Gres= fields as `scontrol show node -o` prints them (Slurm 17.11, 23.02, 24.11; a node without GRES).
    assert parse_slurm_gres("NodeName=gpudev002 Arch=x86_64 Gres=gpu:2 NodeAddr=gpudev002") == 2
    assert parse_slurm_gres("NodeName=node-a1 CPULoad=8.60 Gres=gpu:a100:4 NodeAddr=node-a1.cluster.local") == 4
    assert parse_slurm_gres("NodeName=n Gres=gpu:h100:8(S:0-1),gpu:l4:1(S:0) GresUsed=gpu:h100:0(IDX:N/A)") == 9
    assert parse_slurm_gres("NodeName=gpu-st-ml-1 Gres=gpu:rtxproserver6000:1 NodeAddr=10.0.10.160") == 1
    assert parse_slurm_gres("NodeName=binfservas07 Gres=(null) NodeAddr=binfservas07") is None
    assert parse_slurm_gres("NodeName=n Gres=pfsdir:ess:1,ime:1 NodeAddr=n") is None


@pytest.mark.integration
def test_expected_count_from_slurm_runs_scontrol_once(tmp_path, monkeypatch):
    calls = tmp_path / "calls"
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n'
                        'echo "NodeName=$3 Arch=x86_64 Gres=gpu:h100:8(S:0-1) NodeAddr=$3 State=IDLE"\n')
    scontrol.chmod(scontrol.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    collector = GpuCollector(fake.FakeNvml([h100(0)]), None,
                             GpuOptions("nvml", hostname="node07", expected_count="slurm"), watch_xid=False)
    assert "lockstep_node_gpus_expected 8" in render(collector) and "lockstep_node_gpus_visible 1" in render(collector)
    collector.close()
    assert calls.read_text() == "show node node07 -o\n"


def test_flag_values():
    assert (parse_duration("f", "90s"), parse_duration("f", "15m"), parse_duration("f", "2h")) == (90, 900, 7200)
    assert parse_expected("8") == 8 and parse_expected("slurm") == "slurm" and parse_expected(None) is None
    with pytest.raises(ValueError, match="--gpu.expected-count: 'eight'"):
        parse_expected("eight")
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration("--gpu.xid-window", "soon")
    for text in ("nan", "infs", "-5m", "0"):   # float() reads "nan" and "inf"
        with pytest.raises(ValueError, match="positive, finite"):
            parse_duration("--gpu.xid-window", text)


def test_xid_within_the_window_sets_the_xid_check():
    nvml = fake.FakeNvml([h100(0)])
    nvml.events.put((0, 48))
    collector = GpuCollector(nvml, None, GpuOptions("nvml", xid_window_s=3600))
    try:
        render(collector)
        wait_for_xids(collector, {(0, 48): 1})
        assert 'lockstep_gpu_health{gpu="0",check="xid"} 2' in render(collector)
        collector.options = dataclasses.replace(collector.options, xid_window_s=1e-9)
        assert 'lockstep_gpu_health{gpu="0",check="xid"} 0' in render(collector)
    finally:
        collector.close()
