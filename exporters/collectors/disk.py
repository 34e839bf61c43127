"""``disk``: local block devices (NVMe and other disks) from ``<procfs>/diskstats``."""
from __future__ import annotations

import argparse
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from lockstep.exporters.catalog import storage as m
from lockstep.exporters.config import ExporterConfig, regex_flag
from lockstep.exporters.readfile import read_text
from lockstep.exporters.registry import add_flag, register
from lockstep.exporters.storage.diskstats import DEFAULT_INCLUDE, parse_diskstats
from lockstep.exporters.toolkit.logs import once
from lockstep.exporters.toolkit.sample import Sample

log = logging.getLogger("lockstep.collector.disk")


@dataclass(frozen=True)
class DiskOptions:
    procfs: Path
    include: re.Pattern[str]

    @staticmethod
    def add_flags(group: argparse._ArgumentGroup) -> None:
        add_flag(group, "disk.device-include",
                 help=f"regex of device names to report (default {DEFAULT_INCLUDE!r}: whole NVMe "
                      "namespaces and sd/vd disks, no partitions)")

    @classmethod
    def from_config(cls, config: ExporterConfig) -> "DiskOptions":
        include = regex_flag("disk.device-include", config.flag("disk.device-include", DEFAULT_INCLUDE))
        return cls(config.procfs, include)


class DiskCollector:
    def __init__(self, options: DiskOptions) -> None:
        self.path = os.path.join(options.procfs, "diskstats")
        self.include = options.include

    def collect(self) -> Iterable[Sample]:
        try:
            text = read_text(self.path)
        except FileNotFoundError:
            return
        errors: list[str] = []
        disks = parse_diskstats(text, self.include, errors)
        for error in errors:
            once(log, logging.WARNING, "corrupt:" + error.partition(":")[0],  # one line per item
                 "%s: skipped a corrupt line: %s", self.path, error)
        for d in disks:
            labels = (d.device,)
            yield Sample(m.DISK_READ_BYTES, labels, float(d.read_bytes))
            yield Sample(m.DISK_WRITE_BYTES, labels, float(d.write_bytes))
            yield Sample(m.DISK_READS, labels, float(d.reads))
            yield Sample(m.DISK_WRITES, labels, float(d.writes))
            yield Sample(m.DISK_READ_TIME, labels, d.read_seconds)
            yield Sample(m.DISK_WRITE_TIME, labels, d.write_seconds)
            yield Sample(m.DISK_IO_TIME, labels, d.io_seconds)


@register("disk", help="local disks from /proc/diskstats: bytes, ops and time in I/O",
          add_flags=DiskOptions.add_flags)
def disk(config: ExporterConfig) -> DiskCollector:
    return DiskCollector(DiskOptions.from_config(config))
