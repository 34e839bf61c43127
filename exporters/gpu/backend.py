"""The GPU collector's flags (``--gpu.backend``, ``--gpu.metric-names``, ``--gpu.nvlink-per-link``):
read into frozen options, opened into an ``Nvml`` plus an optional profiling source."""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lockstep.exporters.gpu.readers import MAX_READERS
from lockstep.exporters.registry import add_flag

if TYPE_CHECKING:
    from lockstep.exporters.config import ExporterConfig
    from lockstep.exporters.gpu.protocol import Nvml, ProfSource

BACKENDS = ("nvml", "dcgm", "sim:PATH", "replay:FILE.xml")
NAME_SETS = ("lockstep", "dcgm")


@dataclass(frozen=True)
class GpuOptions:
    backend: str                 # nvml | dcgm | sim | replay
    sim_path: Path | None = None  # the sim backend's gpus.json, or the replay backend's capture
    dcgm_names: bool = False
    hostname: str = ""           # dcgm-exporter's Hostname label
    nvlink_per_link: bool = False
    xid_window_s: float = 3600.0  # how long an XID keeps the xid health check at its severity
    expected_count: int | str | None = None   # GPUs the node should have: a number, or "slurm"
    readers: int = MAX_READERS    # GPUs read at once; 1 reads them one after another in the scrape's thread
    read_timeout_s: float = 5.0   # a GPU whose NVML call takes longer is reported down for this scrape

    @staticmethod
    def add_flags(group: argparse._ArgumentGroup) -> None:
        add_flag(group, "gpu.backend", metavar="nvml|dcgm|sim:PATH|replay:FILE.xml",
                 help="where GPU state comes from (default nvml; sim:PATH reads the simulator's gpus.json; "
                      "replay:FILE.xml serves an `nvidia-smi -q -x` capture as that driver answered it)")
        add_flag(group, "gpu.metric-names", choices=NAME_SETS,
                 help="dcgm: also emit dcgm-exporter's DCGM_FI_* names and labels for shared fields "
                      "(NVIDIA's Grafana dashboard works unchanged); default lockstep")
        add_flag(group, "gpu.nvlink-per-link", action="store_true",
                 help="also report NVLink error counters of every link (18 per H100: +72 series and "
                      "+90 NVML calls per GPU per scrape); by default only the all-links totals. The nvlink "
                      "health check notices a link going down only with this")
        add_flag(group, "gpu.expected-count", metavar="N|slurm",
                 help="GPUs this node should have (lockstep_node_gpus_expected; GPUMissing fires below it): "
                      "a number, or slurm for the node's gpu GRES from `scontrol show node`")
        add_flag(group, "gpu.readers", metavar="N",
                 help=f"GPUs read at once, each in its own thread (default {MAX_READERS}; 1 reads them one after "
                      "another, as the sim and replay backends always are: they answer in Python)")
        add_flag(group, "gpu.read-timeout", metavar="DURATION",
                 help="a GPU whose NVML call has not returned after this long is reported down "
                      "(lockstep_gpu_up 0) while the others are reported (default 5s)")
        add_flag(group, "gpu.xid-window", metavar="DURATION",
                 help="how long an XID keeps the xid health check at its severity (default 1h; 90s, 15m, "
                      "2h)")

    @classmethod
    def from_config(cls, config: "ExporterConfig") -> "GpuOptions":
        """Validate the flags; a bad value raises ValueError (exit 2 at start)."""
        spec = str(config.flag("gpu.backend", "nvml"))
        names = str(config.flag("gpu.metric-names", "lockstep"))
        if names not in NAME_SETS:
            raise ValueError(f"--gpu.metric-names: {names!r} is not one of {', '.join(NAME_SETS)}")
        common = dict(dcgm_names=names == "dcgm", hostname=config.node_name,
                      nvlink_per_link=bool(config.flag("gpu.nvlink-per-link", False)),
                      xid_window_s=parse_duration("--gpu.xid-window", str(config.flag("gpu.xid-window", "1h"))),
                      expected_count=parse_expected(str(config.flag("gpu.expected-count", "")) or None),
                      readers=parse_readers(str(config.flag("gpu.readers", MAX_READERS))),
                      read_timeout_s=parse_duration("--gpu.read-timeout", str(config.flag("gpu.read-timeout", "5s"))))
        if spec in ("nvml", "dcgm"):
            return cls(spec, **common)
        for kind in ("sim", "replay"):
            if spec.startswith(f"{kind}:") and len(spec) > len(kind) + 1:
                return cls(kind, Path(spec[len(kind) + 1:]), **common)
        raise ValueError(f"--gpu.backend: {spec!r} is not one of {', '.join(BACKENDS)}")


def parse_duration(flag: str, text: str) -> float:
    """"90s", "15m", "2h" or plain seconds."""
    units = {"s": 1, "m": 60, "h": 3600}
    number, unit = (text[:-1], units[text[-1]]) if text and text[-1] in units else (text, 1)
    try:
        seconds = float(number) * unit
    except ValueError:
        raise ValueError(f"{flag}: {text!r} is not a duration (90s, 15m, 2h)") from None
    if not math.isfinite(seconds) or seconds <= 0:   # "nan" and "inf" parse as floats
        raise ValueError(f"{flag}: {text!r} must be a positive, finite duration")
    return seconds


def parse_readers(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 64:
        raise ValueError(f"--gpu.readers: {text!r} is not a number of threads from 1 to 64")
    return int(text)


def parse_expected(text: str | None) -> int | str | None:
    if text is None or text == "slurm":
        return text
    if not text.isdigit():
        raise ValueError(f"--gpu.expected-count: {text!r} is neither a number of GPUs nor slurm")
    return int(text)


def open_backend(options: GpuOptions) -> "tuple[Nvml, ProfSource | None]":
    if options.backend == "sim":
        from lockstep.exporters.gpu.dcgm import SimProf
        from lockstep.exporters.gpu.sim import SimNvml
        sim = SimNvml(options.sim_path)
        return sim, SimProf(sim)
    if options.backend == "replay":
        from lockstep.exporters.gpu.replay import ReplayNvml
        return ReplayNvml(options.sim_path), None
    import pynvml
    if options.backend == "dcgm":
        from lockstep.exporters.gpu.dcgm import open_dcgm
        return pynvml, open_dcgm()
    return pynvml, None
