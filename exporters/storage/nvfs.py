"""GPUDirect Storage: ``/proc/driver/nvidia-fs/stats`` of the nvidia-fs kernel module, as NVIDIA/gds-nvidia-fs
``src/nvfs-stat.c`` (``nvfs_stats_show``, ``nvfs_print_gpuinfo``) prints it: a header, then ``Name : key=value
...`` lines (``Reads`` and ``Writes`` twice: counts, then bandwidth and latency) and one line per GPU. Formats
2.0 to 4.0 (tests/fixtures/nvidia-fs/README.md)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from lockstep.exporters.numbers import uint

MIB = 1 << 20   # nvfs-stat.h BYTES_TO_MB: byte counts shifted right by 20, so MiB, truncated

_VERSION = re.compile(r"NVFS statistics\(ver:\s*([0-9][0-9.]*)\)")
_IO_STATS = re.compile(r"^IO stats:\s*(Enabled|Disabled)")
_GPU = re.compile(r"^GPU\s+([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F])\s+uuid:([0-9a-fA-F-]{36})\s*:(.*)$")
_SINGLE = {"Active Shadow-Buffer (MiB)": "shadow_buffer_mib", "Active Shadow-Buffer (MB)": "shadow_buffer_mib",
           "Active Process": "active_processes"}


class NvfsFormatError(ValueError):
    """Not nvidia-fs statistics at all (no ``NVFS statistics(ver: N)`` header)."""


@dataclass(frozen=True, slots=True)
class NvfsGpu:
    pci_bus_id: str
    uuid: str                  # "GPU-<uuid>", as NVML spells it
    registered_bytes: int      # GPU memory pinned through BAR1 for GDS now (Registered_MiB)
    cache_bytes: int           # bounce buffers held for the GPU (Cache_MiB)
    max_pinned_bytes: int      # the most ever pinned at once (max_pinned_MiB)
    cross_root_port_ratio: float | None   # peer traffic crossing a root port; peer stats only


@dataclass(frozen=True)
class NvfsStats:
    version: str
    io_stats_enabled: bool | None     # None: a format without the line (2.0)
    lines: dict[str, dict[str, int]] = field(default_factory=dict)   # "Reads" → {"n": .., "err": .., ...}
    single: dict[str, int] = field(default_factory=dict)              # shadow_buffer_mib, active_processes
    gpus: tuple[NvfsGpu, ...] = ()

    def get(self, line: str, key: str) -> int | None:
        return self.lines.get(line, {}).get(key)


def _pairs(text: str) -> dict[str, int]:
    """``key=value`` tokens; a value that is not a counter raises ValueError (the line is lost, not the file)."""
    out = {}
    for token in text.split():
        key, sep, value = token.partition("=")
        if sep:
            out[key] = uint(value)
    return out


def _gpu(match: re.Match[str]) -> NvfsGpu:
    values = _pairs(match.group(3))
    try:
        registered, cache, pinned = values["Registered_MiB"], values["Cache_MiB"], values["max_pinned_MiB"]
    except KeyError as exc:
        raise ValueError(f"no {exc.args[0]}") from None
    cross = values.get("cross_root_port(%)")
    return NvfsGpu(match.group(1).lower(), "GPU-" + match.group(2).lower(), registered * MIB, cache * MIB,
                   pinned * MIB, None if cross is None else cross / 100.0)


def parse_nvfs_stats(text: str, errors: list[str] | None = None) -> NvfsStats:
    """The statistics; a line with a corrupt value loses that line (or that GPU) alone, named in ``errors``."""
    version = _VERSION.search(text)
    if version is None:
        raise NvfsFormatError("no 'NVFS statistics(ver: N)' header: not nvidia-fs statistics")
    enabled: bool | None = None
    lines: dict[str, dict[str, int]] = {}
    single: dict[str, int] = {}
    gpus: list[NvfsGpu] = []
    for raw in text.splitlines():
        line = raw.strip()
        try:
            if (gpu := _GPU.match(line)) is not None:
                gpus.append(_gpu(gpu))
            elif (io := _IO_STATS.match(line)) is not None:
                enabled = io.group(1) == "Enabled"
            elif line.startswith("GPU "):
                raise ValueError("not a GPU line of nvfs_print_gpuinfo")
            elif ":" in line:
                name, _, rest = line.partition(":")
                name = name.strip()
                if name in _SINGLE:
                    single[_SINGLE[name]] = uint(rest.strip())
                elif "=" in rest and not name.startswith("NVFS"):
                    lines.setdefault(name, {}).update(_pairs(rest))
        except ValueError as exc:
            if errors is not None:
                errors.append(f"{line[:40]!r}: {exc}")
    return NvfsStats(version.group(1), enabled, lines, single, tuple(gpus))
