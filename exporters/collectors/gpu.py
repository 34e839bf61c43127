"""``gpu`` collector: NVIDIA GPUs through NVML (pynvml), DCGM or the simulator's gpus.json.

Registration only; the work lives in ``lockstep.exporters.gpu`` (imported when the collector is built, so
listing flags never loads pynvml)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from lockstep.exporters.gpu.backend import GpuOptions, open_backend
from lockstep.exporters.registry import register

if TYPE_CHECKING:
    from lockstep.exporters.config import ExporterConfig
    from lockstep.exporters.registry import Collector


@register("gpu", help="NVIDIA GPUs: NVML/DCGM/simulator state, XID events, cluster-validation checks",
          add_flags=GpuOptions.add_flags)
def gpu_collector(config: "ExporterConfig") -> "Collector":
    options = GpuOptions.from_config(config)
    from lockstep.exporters.gpu.collector import GpuCollector
    nvml, prof = open_backend(options)
    return GpuCollector(nvml, prof, options)
