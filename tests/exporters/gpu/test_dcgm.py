"""``--gpu.backend=dcgm``: DCGM's profiling fields where its bindings run, NVML alone where not."""
from __future__ import annotations

import ctypes
import importlib.util
import logging

import pynvml

from lockstep.exporters.gpu.backend import GpuOptions, open_backend
from lockstep.exporters.gpu.collector import GpuCollector
from lockstep.exporters.gpu.dcgm import DcgmProf, open_dcgm, parse_dcgm_values
from tests.helpers.gpu import DcgmReader, fake, h100, render


def test_without_bindings_falls_back_to_nvml_and_says_so(caplog):
    assert importlib.util.find_spec("DcgmReader") is None, "this test needs a host without DCGM bindings"
    with caplog.at_level(logging.WARNING, logger="lockstep.gpu.dcgm"):
        nvml, prof = open_backend(GpuOptions("dcgm"))
    assert nvml is pynvml and prof is None
    assert "DCGM Python bindings (DcgmReader) not installed" in caplog.text
    collector = GpuCollector(fake.FakeNvml([h100(0)]), prof, GpuOptions("dcgm"), watch_xid=False)
    text = render(collector)
    assert 'lockstep_gpu_up{gpu="0"} 1' in text and "lockstep_gpu_sm_active_ratio" not in text


def test_dcgm_fields_become_lockstep_metrics():
    prof = open_dcgm(DcgmReader)
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


# dcgm_structs' health response layout (DCGM's testing/python3/dcgm_structs.py), with a short incident array.
class ErrorDetail(ctypes.Structure):
    _fields_ = [("msg", ctypes.c_char * 1024), ("code", ctypes.c_uint)]


class EntityPair(ctypes.Structure):
    _fields_ = [("entityGroupId", ctypes.c_uint32), ("entityId", ctypes.c_uint32)]


class Incident(ctypes.Structure):
    _fields_ = [("system", ctypes.c_uint), ("health", ctypes.c_uint32), ("error", ErrorDetail),
                ("entityInfo", EntityPair)]


class HealthResponse(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("overallHealth", ctypes.c_uint32), ("incidentCount", ctypes.c_uint32),
                ("incidents", Incident * 8)]


def incident(system: int, health: int, group: int, entity: int, msg: bytes) -> Incident:
    return Incident(system, health, ErrorDetail(msg, 0), EntityPair(group, entity))


class HealthGroup:
    """pydcgm's DcgmGroup as DcgmReader holds it: .health.Set(systems), .health.Check(), GetGpuIds()."""

    def __init__(self, response):
        self.health, self.response, self.watched = self, response, None

    def Set(self, systems):
        self.watched = systems

    def Check(self):
        return self.response

    def GetGpuIds(self):
        return [0, 1]


def test_dcgm_health_watches_become_checks():
    response = HealthResponse(5, 20, 3)
    response.incidents[0] = incident(0x1, 10, 1, 0, b"Detected more than 8 PCIe replays per minute for GPU 0")
    response.incidents[1] = incident(0x10, 20, 1, 1, b"Uncorrectable ECC errors on GPU 1")
    response.incidents[2] = incident(0x800, 20, 3, 0, b"NVSwitch fatal error")   # an NVSwitch entity: not a GPU
    reader = DcgmReader(fieldIds=[], updateFrequency=1)
    reader.m_dcgmGroup = HealthGroup(response)
    collector = GpuCollector(fake.FakeNvml([h100(0), h100(1)]), DcgmProf(reader), GpuOptions("dcgm"), watch_xid=False)
    text = render(collector)
    collector.close()
    assert reader.m_dcgmGroup.watched == 0xFFFFFFFF
    assert 'lockstep_gpu_health{gpu="0",check="dcgm_pcie"} 1' in text
    assert 'lockstep_gpu_health{gpu="0",check="dcgm_mem"} 0' in text
    assert 'lockstep_gpu_health{gpu="1",check="dcgm_mem"} 2' in text and 'lockstep_gpu_healthy{gpu="1"} 0' in text
    assert 'lockstep_gpu_healthy{gpu="0"} 1' in text
