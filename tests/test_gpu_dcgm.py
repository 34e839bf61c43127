"""``--gpu.backend=dcgm``: DCGM's profiling fields where its bindings run, NVML alone where not."""
from __future__ import annotations

import importlib.util
import logging

import pynvml

from exporters.gpu.backend import GpuOptions, open_backend
from exporters.gpu.collector import GpuCollector
from exporters.gpu.dcgm import open_dcgm, parse_dcgm_values
from test_gpu_nvml import fake, h100, render


def test_without_bindings_falls_back_to_nvml_and_says_so(caplog):
    assert importlib.util.find_spec("DcgmReader") is None, "this test needs a host without DCGM bindings"
    with caplog.at_level(logging.WARNING, logger="lockstep.gpu.dcgm"):
        nvml, prof = open_backend(GpuOptions("dcgm"))
    assert nvml is pynvml and prof is None
    assert "DCGM Python bindings (DcgmReader) not installed" in caplog.text
    collector = GpuCollector(fake.FakeNvml([h100(0)]), prof, GpuOptions("dcgm"), watch_xid=False)
    text = render(collector)
    assert 'lockstep_gpu_up{gpu="0"} 1' in text and "lockstep_gpu_sm_active_ratio" not in text


class Reader:
    """DcgmReader's API as the collector uses it: constructor keywords and the latest-values call,
    keyed by DCGM GPU id then field id; DCGM_FP64_BLANK marks a field not sampled yet."""

    def __init__(self, fieldIds, updateFrequency):
        self.fieldIds, self.updateFrequency = fieldIds, updateFrequency
        self.shutdown = False

    def GetLatestGpuValuesAsFieldIdDict(self):
        return {0: {1002: 0.81, 1003: 0.4, 1004: 0.62, 1005: 0.3, 1011: 1.5e11, 1012: 140737488355328.0}}

    def Shutdown(self):
        self.shutdown = True


def test_dcgm_fields_become_lockstep_metrics():
    prof = open_dcgm(Reader)
    assert prof._reader.fieldIds == [1002, 1003, 1004, 1005, 1011, 1012]
    collector = GpuCollector(fake.FakeNvml([h100(0)]), prof, GpuOptions("dcgm"), watch_xid=False)
    text = render(collector)
    collector.close()
    assert 'lockstep_gpu_sm_active_ratio{gpu="0"} 0.81' in text
    assert 'lockstep_gpu_tensor_active_ratio{gpu="0"} 0.62' in text
    assert 'lockstep_gpu_nvlink_bandwidth_bytes_per_second{gpu="0",direction="tx"} 150000000000' in text
    assert 'direction="rx"' not in text  # blank: not sampled yet
    assert prof._reader.shutdown


def test_host_engine_down_falls_back(caplog):
    def refuse(**kwargs):
        raise ConnectionError("connection to nv-hostengine refused")
    with caplog.at_level(logging.WARNING, logger="lockstep.gpu.dcgm"):
        assert open_dcgm(refuse) is None
    assert "nv-hostengine refused" in caplog.text


def test_parse_dcgm_values_drops_blanks_and_unknown_fields():
    assert parse_dcgm_values({1002: None, 1004: 0.5, 9999: 1.0, 1005: 9223372036854775792}) == {"tensor_active": 0.5}
