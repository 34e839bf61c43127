"""Block device counters from ``<procfs>/diskstats`` (kernel Documentation/admin-guide/iostats.rst)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from lockstep.exporters.numbers import uint

# iostats.rst: sector counts are always in 512-byte units, whatever the device's sector size.
SECTOR_BYTES = 512
DEFAULT_INCLUDE = r"^(nvme\d+n\d+|[svx]d[a-z]+)$"  # whole NVMe namespaces and sd/vd/xvd disks


@dataclass(frozen=True, slots=True)
class DiskStats:
    device: str
    reads: int
    read_bytes: int
    read_seconds: float
    writes: int
    write_bytes: int
    write_seconds: float
    io_seconds: float


def parse_diskstats(text: str, include: re.Pattern[str] | None = None,
                    errors: list[str] | None = None) -> list[DiskStats]:
    """Devices whose name matches ``include`` (all when None). Lines with fewer than the 14 fields
    of kernels since 2.6 are skipped; the discard/flush fields of newer kernels are not used. A
    line with a corrupt counter loses that device alone (named in ``errors``)."""
    disks = []
    for line in text.splitlines():
        f = line.split()
        if len(f) < 14 or (include is not None and not include.search(f[2])):
            continue
        try:
            n = [uint(v) for v in f[3:14]]
        except ValueError as exc:
            if errors is not None:
                errors.append(f"{f[2]}: {exc}")
            continue
        # fields after the name: reads merged sectors ms_reading writes merged sectors ms_writing
        # in_flight ms_io weighted_ms (times are milliseconds)
        disks.append(DiskStats(f[2], n[0], n[2] * SECTOR_BYTES, n[3] / 1000.0,
                               n[4], n[6] * SECTOR_BYTES, n[7] / 1000.0, n[9] / 1000.0))
    return disks
