"""dcgm-exporter's names for the fields both exporters have (``--gpu.metric-names=dcgm``), so NVIDIA's
own Grafana dashboard works unchanged on a node running lockstep.

Names, types, help texts and units are dcgm-exporter's (its default-counters.csv, in
../shared/fixtures/dcgm-exporter): MHz, W, mJ, MiB, percent, ratios. Labels are the ones dcgm-exporter
puts on every series. These names are not lockstep_ catalog names: ``Metric(foreign=True)``.
"""
from __future__ import annotations

from typing import Callable, Iterator

from lockstep.exporters.catalog.model import COUNTER, GAUGE, Metric
from lockstep.exporters.gpu.snapshot import GpuSnapshot
from lockstep.exporters.toolkit.sample import Sample

LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION")
MIB = 1024 * 1024


def _prof(key: str) -> Callable[[GpuSnapshot], float | None]:
    return lambda s: dict(s.prof).get(key)


def _div(attr: str, by: float) -> Callable[[GpuSnapshot], float | None]:
    return lambda s: None if getattr(s, attr) is None else getattr(s, attr) / by


_TABLE: tuple[tuple[str, str, str, Callable[[GpuSnapshot], float | None]], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", GAUGE, "SM clock frequency (in MHz).", _div("sm_clock_mhz", 1)),
    ("DCGM_FI_DEV_MEM_CLOCK", GAUGE, "Memory clock frequency (in MHz).", _div("mem_clock_mhz", 1)),
    ("DCGM_FI_DEV_MEMORY_TEMP", GAUGE, "Memory temperature (in C).", _div("memory_temperature_c", 1)),
    ("DCGM_FI_DEV_GPU_TEMP", GAUGE, "GPU temperature (in C).", _div("temperature_c", 1)),
    ("DCGM_FI_DEV_POWER_USAGE", GAUGE, "Power draw (in W).", _div("power_average_mw", 1000)),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", COUNTER, "Total energy consumption since boot (in mJ).",
     _div("energy_mj", 1)),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", COUNTER, "Total number of PCIe retries.", _div("pcie_replay", 1)),
    ("DCGM_FI_DEV_GPU_UTIL", GAUGE, "GPU utilization (in %).", _div("utilization_gpu", 1)),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", GAUGE, "Memory utilization (in %).", _div("utilization_memory", 1)),
    ("DCGM_FI_DEV_FB_FREE", GAUGE, "Framebuffer memory free (in MiB).", _div("memory_free", MIB)),
    ("DCGM_FI_DEV_FB_USED", GAUGE, "Framebuffer memory used (in MiB).", _div("memory_used", MIB)),
    ("DCGM_FI_DEV_FB_RESERVED", GAUGE, "Framebuffer memory reserved (in MiB).", _div("memory_reserved", MIB)),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", COUNTER, "Number of remapped rows for uncorrectable errors",
     _div("remapped_uncorrectable", 1)),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", COUNTER, "Number of remapped rows for correctable errors",
     _div("remapped_correctable", 1)),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", GAUGE, "Whether remapping of rows has failed", _div("remapped_failed", 1)),
    ("DCGM_FI_PROF_SM_ACTIVE", GAUGE, "The ratio of cycles an SM has at least 1 warp assigned.",
     _prof("sm_active")),
    ("DCGM_FI_PROF_SM_OCCUPANCY", GAUGE, "The ratio of number of warps resident on an SM.", _prof("sm_occupancy")),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", GAUGE, "Ratio of cycles the tensor (HMMA) pipe is active.",
     _prof("tensor_active")),
    ("DCGM_FI_PROF_DRAM_ACTIVE", GAUGE,
     "Ratio of cycles the device memory interface is active sending or receiving data.", _prof("dram_active")),
)
METRICS = {name: Metric(name, kind, help, LABELS, foreign=True) for name, kind, help, _ in _TABLE}
XID = Metric("DCGM_FI_DEV_XID_ERRORS", GAUGE, "Value of the last XID error encountered.", LABELS, foreign=True)


def dcgm_labels(snap_static, driver: str, hostname: str) -> tuple[str, ...]:
    minor = snap_static.index if snap_static.minor is None else snap_static.minor
    return (str(snap_static.index), snap_static.uuid, snap_static.pci_bus_id, f"nvidia{minor}",
            snap_static.name, hostname, driver)


def dcgm_samples(snap: GpuSnapshot, labels: tuple[str, ...], last_xid: int) -> Iterator[Sample]:
    """dcgm-exporter series of one GPU (``labels`` from ``dcgm_labels``); ``last_xid`` 0 if none seen."""
    for name, _, _, value_of in _TABLE:
        value = value_of(snap)
        if value is not None:
            yield Sample(METRICS[name], labels, value)
    yield Sample(XID, labels, float(last_xid))
