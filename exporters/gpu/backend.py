"""The GPU collector's flags (``--gpu.backend``, ``--gpu.metric-names``, ``--gpu.nvlink-per-link``):
read into frozen options, opened into an ``Nvml`` plus an optional profiling source."""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from exporters.config import ExporterConfig
    from exporters.gpu.protocol import Nvml, ProfSource

BACKENDS = ("nvml", "dcgm", "sim:PATH", "replay:FILE.xml")
NAME_SETS = ("lockstep", "dcgm")


@dataclass(frozen=True)
class GpuOptions:
    backend: str                 # nvml | dcgm | sim | replay
    sim_path: Path | None = None  # the sim backend's gpus.json, or the replay backend's capture
    dcgm_names: bool = False
    hostname: str = ""           # dcgm-exporter's Hostname label
    nvlink_per_link: bool = False

    @staticmethod
    def add_flags(group: argparse._ArgumentGroup) -> None:
        group.add_argument("--gpu.backend", dest="gpu.backend", default=None,
                           metavar="nvml|dcgm|sim:PATH|replay:FILE.xml",
                           help="where GPU state comes from (default nvml; sim:PATH reads the simulator's gpus.json; "
                                "replay:FILE.xml serves an `nvidia-smi -q -x` capture as that driver answered it)")
        group.add_argument("--gpu.metric-names", dest="gpu.metric-names", default=None, choices=NAME_SETS,
                           help="dcgm: also emit dcgm-exporter's DCGM_FI_* names and labels for shared fields "
                                "(NVIDIA's Grafana dashboard works unchanged); default lockstep")
        group.add_argument("--gpu.nvlink-per-link", dest="gpu.nvlink-per-link", action="store_true", default=None,
                           help="also report NVLink error counters of every link (18 per H100: +72 series and "
                                "+90 NVML calls per GPU per scrape); by default only the all-links totals")

    @classmethod
    def from_config(cls, config: "ExporterConfig") -> "GpuOptions":
        """Validate the flags; a bad value raises ValueError (exit 2 at start)."""
        spec = str(config.flag("gpu.backend", "nvml"))
        names = str(config.flag("gpu.metric-names", "lockstep"))
        if names not in NAME_SETS:
            raise ValueError(f"--gpu.metric-names: {names!r} is not one of {', '.join(NAME_SETS)}")
        common = dict(dcgm_names=names == "dcgm", hostname=config.node_name,
                      nvlink_per_link=bool(config.flag("gpu.nvlink-per-link", False)))
        if spec in ("nvml", "dcgm"):
            return cls(spec, **common)
        for kind in ("sim", "replay"):
            if spec.startswith(f"{kind}:") and len(spec) > len(kind) + 1:
                return cls(kind, Path(spec[len(kind) + 1:]), **common)
        raise ValueError(f"--gpu.backend: {spec!r} is not one of {', '.join(BACKENDS)}")


def open_backend(options: GpuOptions) -> "tuple[Nvml, ProfSource | None]":
    if options.backend == "sim":
        from exporters.gpu.dcgm import SimProf
        from exporters.gpu.sim import SimNvml
        sim = SimNvml(options.sim_path)
        return sim, SimProf(sim)
    if options.backend == "replay":
        from exporters.gpu.replay import ReplayNvml
        return ReplayNvml(options.sim_path), None
    import pynvml
    if options.backend == "dcgm":
        from exporters.gpu.dcgm import open_dcgm
        return pynvml, open_dcgm()
    return pynvml, None
