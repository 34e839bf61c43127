"""GPUDirect Storage: nvidia-fs statistics parsed from NVIDIA's published output, a project's published output
with I/O statistics off, and a file in the driver's exact format (values read off the files by hand); the
``gds`` collector's golden exposition, a node without nvidia-fs, and a corrupt line losing that line alone."""
from __future__ import annotations

import logging
import shutil

import pytest

from lockstep.exporters.collectors.gds import GdsCollector, GdsOptions
from lockstep.exporters.storage.nvfs import MIB, NvfsFormatError, NvfsGpu, parse_nvfs_stats
from lockstep.exporters.toolkit.exposition import Encoder, render_text
from tests.helpers.paths import FIXTURES

NVFS = FIXTURES / "nvidia-fs"


def test_nvidia_configuration_guide_output():
    s = parse_nvfs_stats((NVFS / "configuration-guide-ver2.txt").read_text())
    assert s.version == "2.0" and s.io_stats_enabled is None   # format 2.0 has no "IO stats:" line
    assert s.lines["Reads"] == {"n": 424436862, "ok": 424436734, "err": 0, "readMiB": 21518771, "io_state_err": 0,
                                "Bandwidth(MiB/s)": 13081, "Avg-Latency(usec)": 9773}
    assert s.get("Writes", "writeMiB") == 9748727 and s.get("Writes", "Avg-Latency(usec)") == 18386
    assert s.lines["Error"] == {"cpu-gpu-pages": 0, "sg-ext": 0, "dma-map": 0}   # no dma-ref before 4.0
    assert s.single == {"shadow_buffer_mib": 128, "active_processes": 1}
    assert s.gpus == (NvfsGpu("0000:be:00.0", "GPU-87e5c586-88ed-583b-df45-fcee0f1e7917", 0, 0, 8 * MIB, 0.0),
                      NvfsGpu("0000:e7:00.0", "GPU-029faa3b-cb0d-2718-259c-6dc650c636eb", 0, 0, 8 * MIB, 0.0))


def test_io_stats_disabled_leaves_counts_absent_and_errors_present():
    s = parse_nvfs_stats((NVFS / "stelline-ver4-io-stats-disabled.txt").read_text())
    assert (s.version, s.io_stats_enabled) == ("4.0", False)
    assert s.lines["Reads"] == {"err": 0, "io_state_err": 0}
    assert s.get("Mmap", "n") == 1 and s.get("Mmap", "munmap") == 2
    assert s.gpus == (NvfsGpu("0000:01:00.0", "GPU-fb1e6550-2a78-d767-1f0d-7512eb8c552d", 0, 0, MIB, None),)


def test_driver_format_with_tabs_and_peer_stats():
    s = parse_nvfs_stats((NVFS / "driver-format-ver4-io-stats-enabled.txt").read_text())
    assert s.io_stats_enabled is True
    assert s.lines["Batches"] == {"n": 4096, "ok": 4090, "err": 6, "Avg-Submit-Latency(usec)": 41}
    assert s.get("Sparse Reads", "pages") == 11
    assert s.gpus[1] == NvfsGpu("0000:2a:00.0", "GPU-2f6c1c1e-0b3a-4c55-9d7e-000000000001", 2048 * MIB, 64 * MIB,
                                2048 * MIB, 0.12)


def test_a_corrupt_line_loses_that_line_alone():
    text = (NVFS / "driver-format-ver4-io-stats-enabled.txt").read_text()
    text = text.replace("readMiB=1048576", "readMiB=\u0663").replace("uuid:2f6c1c1e-0b3a-4c55-9d7e-000000000001",
                                                                      "uuid:zz")
    errors: list[str] = []
    s = parse_nvfs_stats(text, errors)
    assert s.lines["Reads"] == {"Bandwidth(MiB/s)": 13224, "Avg-Latency(usec)": 594}   # the other Reads line stands
    assert [g.pci_bus_id for g in s.gpus] == ["0000:18:00.0"]
    assert len(errors) == 2


def test_not_nvidia_fs_statistics_is_its_own_error():
    with pytest.raises(NvfsFormatError):
        parse_nvfs_stats("Reads : n=1\n")


def render(collector) -> str:
    families: dict = {}
    Encoder().add(families, collector.collect())
    return render_text(families)


def node(tmp_path, fixture: str):
    (tmp_path / "driver/nvidia-fs").mkdir(parents=True)
    shutil.copy(NVFS / fixture, tmp_path / "driver/nvidia-fs/stats")
    return GdsCollector(GdsOptions(tmp_path))


@pytest.mark.parametrize("fixture", ["driver-format-ver4-io-stats-enabled.txt", "stelline-ver4-io-stats-disabled.txt"])
def test_golden_exposition(fixture, tmp_path, golden):
    text = render(node(tmp_path, fixture))
    golden(f"storage/gds_{fixture.removesuffix('.txt')}.prom", text)
    if "enabled" in fixture:
        assert 'lockstep_gds_bytes_total{op="read"} 1099511627776' in text          # readMiB=1048576
        assert 'lockstep_gds_latency_seconds{op="read"} 0.000594' in text
        assert 'lockstep_gds_bandwidth_bytes_per_second{op="write"} 7295991808' in text  # 6958 MiB/s
    else:
        assert "lockstep_gds_operations_total" not in text and "lockstep_gds_bytes_total" not in text
        assert 'lockstep_gds_io_stats_enabled 0' in text


def test_a_node_without_nvidia_fs_reports_nothing_quietly(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    assert GdsCollector(GdsOptions(tmp_path)).collect() == []
    assert not caplog.records
