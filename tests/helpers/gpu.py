"""The GPU collector's tests: a fake NVML speaking pynvml's API (tests/fixtures/gpu/fake_pynvml.py) and an
H100 of it, a fake DcgmReader, the collector over the simulator's gpus.json, rendering a collector, and
waiting for XID events."""
from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import pynvml

from lockstep.exporters.gpu.backend import GpuOptions, open_backend
from lockstep.exporters.gpu.collector import GpuCollector
from lockstep.exporters.toolkit.exposition import Encoder, render_openmetrics, render_text
from tests.helpers.paths import FIXTURES

_spec = importlib.util.spec_from_file_location("fake_pynvml", FIXTURES / "gpu/fake_pynvml.py")
fake = sys.modules.setdefault("fake_pynvml", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(fake)
Err = fake.Err
NS = Err(pynvml.NVML_ERROR_NOT_SUPPORTED)
ULL, DBL = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, pynvml.NVML_VALUE_TYPE_DOUBLE


def h100(index: int, **over) -> dict:
    """What an H100 SXM answers (values in NVML units: MHz, mW, mJ, %, bytes). Like the real driver it
    answers v2 memory info with the reservation apart, and MIG mode [0, 0] (MIG-capable, disabled)."""
    dev = {
        "uuid": f"GPU-5e0b1b1a-7c3d-4f0e-8a55-91c3d2e4f60{index}", "name": "NVIDIA H100 80GB HBM3",
        "busId": f"00000000:{0x18 + 0x10 * index:02X}:00.0", "minor": index, "util": (100, 38),
        "clocks": {pynvml.NVML_CLOCK_SM: 1980, pynvml.NVML_CLOCK_MEM: 2619},
        "max_clocks": {pynvml.NVML_CLOCK_SM: 1980, pynvml.NVML_CLOCK_MEM: 2619},
        "power": 650000, "power_limit": 700000, "energy": 98765432, "temp": 74,
        # v1 (total, free, used with the reservation); v2 reports 869 MiB of it apart (the A100-80GB capture's).
        "mem": (85520809984, 12345678848, 73175131136), "mem_reserved": 869 << 20, "mig": [0, 0],
        "reasons": 0x0, "ecc_mode": [1, 1],
        "ecc": {0: 5, 1: 0}, "rows": (2, 0, 0, 0), "replay": 1, "width": 16, "max_width": 16, "gen": 5, "max_gen": 5,
        "nvlink": [[0, 0, 1, 0], None, [0, 2, 0, 0]], "persistence": 1,
        "p2p": {peer: pynvml.NVML_P2P_STATUS_OK for peer in range(3) if peer != index},
        "fields": {pynvml.NVML_FI_DEV_MEMORY_TEMP: (ULL, 66), pynvml.NVML_FI_DEV_POWER_INSTANT: (ULL, 702500),
                   pynvml.NVML_FI_DEV_ENERGY: (ULL, 98765432), pynvml.NVML_FI_DEV_PCIE_REPLAY_COUNTER: (ULL, 1),
                   pynvml.NVML_FI_DEV_ECC_CURRENT: (ULL, 1), pynvml.NVML_FI_DEV_ECC_SBE_VOL_TOTAL: (ULL, 5),
                   pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL: (ULL, 0), pynvml.NVML_FI_DEV_REMAPPED_COR: (ULL, 2),
                   pynvml.NVML_FI_DEV_REMAPPED_UNC: (ULL, 0), pynvml.NVML_FI_DEV_REMAPPED_PENDING: (ULL, 0),
                   pynvml.NVML_FI_DEV_REMAPPED_FAILURE: (ULL, 0),
                   pynvml.NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL: (ULL, 0),
                   pynvml.NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL: (ULL, 2),
                   pynvml.NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL: (ULL, 1),
                   pynvml.NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL: (ULL, 0)},
    }
    dev.update(over)
    return dev


def render(collector: GpuCollector, openmetrics: bool = False) -> str:
    families: dict = {}
    Encoder().add(families, collector.collect())
    return render_openmetrics(families) if openmetrics else render_text(families)


def wait_for_xids(collector: GpuCollector, expected: dict) -> None:
    """Until the collector's XID thread has counted ``expected`` ({(gpu, xid): count})."""
    deadline = time.monotonic() + 10
    while collector._xid is None or collector._xid.counts() != expected:
        assert time.monotonic() < deadline, f"XID counts {collector._xid and collector._xid.counts()} != {expected}"
        time.sleep(0.02)


def sim_collector(path: Path, dcgm: bool = False, watch_xid: bool = True) -> GpuCollector:
    options = GpuOptions("sim", path, dcgm_names=dcgm, hostname="node00")
    nvml, prof = open_backend(options)
    return GpuCollector(nvml, prof, options, watch_xid=watch_xid)


def scrape_until_xids(collector: GpuCollector, expected: dict) -> None:
    """Scrape until the collector has counted ``expected``, for backends whose events a scrape brings in."""
    deadline = time.monotonic() + 10
    while collector._xid is None or collector._xid.counts() != expected:
        assert time.monotonic() < deadline, f"XID counts {collector._xid and collector._xid.counts()} != {expected}"
        render(collector)
        time.sleep(0.02)


class DcgmReader:
    """DcgmReader's API as the collector uses it: constructor keywords and the latest-values call,
    keyed by DCGM GPU id then field id; DCGM_FP64_BLANK marks a field not sampled yet."""

    def __init__(self, fieldIds, updateFrequency):
        self.fieldIds, self.updateFrequency = fieldIds, updateFrequency
        self.shutdown = False

    def GetLatestGpuValuesAsFieldIdDict(self):
        return {0: {1002: 0.81, 1003: 0.4, 1004: 0.62, 1005: 0.3, 1011: 1.5e11, 1012: 140737488355328.0}}

    def Shutdown(self):
        self.shutdown = True
