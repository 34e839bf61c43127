"""``gds``: GPUDirect Storage from the nvidia-fs module's ``<procfs>/driver/nvidia-fs/stats``: operations, bytes,
errors, the driver's bandwidth and latency, the host shadow buffer, and GPU memory registered per GPU. A node
without the module (no GDS) has no file: nothing is reported and nothing is logged above debug."""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from lockstep.exporters.catalog import storage as m
from lockstep.exporters.config import ExporterConfig
from lockstep.exporters.readfile import read_text
from lockstep.exporters.registry import register
from lockstep.exporters.storage.nvfs import MIB, NvfsStats, parse_nvfs_stats
from lockstep.exporters.toolkit.logs import once
from lockstep.exporters.toolkit.sample import Sample

log = logging.getLogger("lockstep.collector.gds")
OPS = (("read", "Reads"), ("write", "Writes"), ("batch", "Batches"))
ERRORS = (("mmap", "Mmap", "err"), ("bar1_map", "Bar1-map", "err"), ("cpu_gpu_pages", "Error", "cpu-gpu-pages"),
          ("sg_ext", "Error", "sg-ext"), ("dma_map", "Error", "dma-map"), ("dma_ref", "Error", "dma-ref"))


@dataclass(frozen=True)
class GdsOptions:
    procfs: Path

    @classmethod
    def from_config(cls, config: ExporterConfig) -> "GdsOptions":
        return cls(config.procfs)


def samples(s: NvfsStats) -> Iterable[Sample]:
    if s.io_stats_enabled is not None:
        yield Sample(m.GDS_IO_STATS_ENABLED, (), 1.0 if s.io_stats_enabled else 0.0)
    for op, line in OPS:
        for metric, key, scale in ((m.GDS_OPS, "n", 1), (m.GDS_OPS_FAILED, "err", 1),
                                   (m.GDS_IO_STATE_ERRORS, "io_state_err", 1),
                                   (m.GDS_BYTES, f"{op}MiB", MIB), (m.GDS_BANDWIDTH, "Bandwidth(MiB/s)", MIB),
                                   (m.GDS_LATENCY, "Avg-Latency(usec)", 1e-6),
                                   (m.GDS_LATENCY, "Avg-Submit-Latency(usec)", 1e-6)):
            value = s.get(line, key)
            if value is not None:
                yield Sample(metric, (op,), float(value) * scale)
    for kind, line, key in ERRORS:
        value = s.get(line, key)
        if value is not None:
            yield Sample(m.GDS_ERRORS, (kind,), float(value))
    if (shadow := s.single.get("shadow_buffer_mib")) is not None:
        yield Sample(m.GDS_SHADOW_BUFFER, (), float(shadow * MIB))
    if (processes := s.single.get("active_processes")) is not None:
        yield Sample(m.GDS_ACTIVE_PROCESSES, (), float(processes))
    for gpu in s.gpus:
        labels = (gpu.uuid, gpu.pci_bus_id)
        yield Sample(m.GDS_GPU_REGISTERED, labels, float(gpu.registered_bytes))
        yield Sample(m.GDS_GPU_CACHE, labels, float(gpu.cache_bytes))
        yield Sample(m.GDS_GPU_MAX_PINNED, labels, float(gpu.max_pinned_bytes))
        if gpu.cross_root_port_ratio is not None:
            yield Sample(m.GDS_GPU_CROSS_ROOT_PORT, labels, gpu.cross_root_port_ratio)


class GdsCollector:
    def __init__(self, options: GdsOptions) -> None:
        self.path = os.path.join(options.procfs, "driver", "nvidia-fs", "stats")

    def collect(self) -> list[Sample]:
        try:
            text = read_text(self.path)
        except FileNotFoundError:
            log.debug("no %s: nvidia-fs not loaded (no GPUDirect Storage here)", self.path)
            return []
        errors: list[str] = []
        stats = parse_nvfs_stats(text, errors)   # NvfsFormatError: the collector fails, said once per scrape
        for error in errors:
            once(log, logging.WARNING, "corrupt:" + error[:24], "%s: skipped a corrupt line: %s", self.path, error)
        return list(samples(stats))


@register("gds", help="GPUDirect Storage (nvidia-fs): operations, bytes, errors, bandwidth, latency, GPU memory registered")
def gds(config: ExporterConfig) -> GdsCollector:
    return GdsCollector(GdsOptions.from_config(config))
