"""``nfs``: NFS client bytes and per-operation RPC statistics from ``<procfs>/self/mountstats``, for
the mounts under ``--path.rootfs`` (the host's, when the agent runs in a container)."""
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
from lockstep.exporters.storage.mounts import host_mounts
from lockstep.exporters.storage.mountstats import NfsMount, parse_mountstats
from lockstep.exporters.toolkit.logs import once
from lockstep.exporters.toolkit.sample import Sample

log = logging.getLogger("lockstep.collector.nfs")


def _total(a: int | None, b: int | None) -> int | None:
    return None if a is None else a + (b or 0)


def mount_samples(mount: NfsMount) -> Iterable[Sample]:
    labels = (mount.mountpoint, mount.fstype, mount.device)
    for metric, value in ((m.READ_BYTES, _total(mount.normal_read_bytes, mount.direct_read_bytes)),
                          (m.WRITE_BYTES, _total(mount.normal_write_bytes, mount.direct_write_bytes)),
                          (m.DIRECT_READ_BYTES, mount.direct_read_bytes),
                          (m.DIRECT_WRITE_BYTES, mount.direct_write_bytes)):
        if value is not None:
            yield Sample(metric, labels, float(value))
    for op in mount.ops:
        # NFSv4 lists ~60 operations, most never used by a training job: only operations seen at
        # least once become series, which keeps the node inside its series budget.
        if op.operations == 0 and op.transmissions == 0:
            continue
        op_labels = labels + (op.op,)
        yield Sample(m.NFS_RPC_OPS, op_labels, float(op.operations))
        yield Sample(m.NFS_RPC_TRANSMISSIONS, op_labels, float(op.transmissions))
        yield Sample(m.NFS_RPC_RETRANSMISSIONS, op_labels, float(op.retransmissions))
        yield Sample(m.NFS_RPC_MAJOR_TIMEOUTS, op_labels, float(op.major_timeouts))
        yield Sample(m.NFS_RPC_RTT, op_labels, op.rtt_seconds)
        yield Sample(m.NFS_RPC_EXECUTE, op_labels, op.execute_seconds)


@dataclass(frozen=True)
class NfsOptions:
    procfs: Path
    rootfs: Path = Path("/")

    @classmethod
    def from_config(cls, config: ExporterConfig) -> "NfsOptions":
        return cls(config.procfs, config.rootfs)


class NfsCollector:
    def __init__(self, options: NfsOptions) -> None:
        self.path = os.path.join(options.procfs, "self", "mountstats")
        self.rootfs = str(options.rootfs)

    def collect(self) -> Iterable[Sample]:
        try:
            text = read_text(self.path)
        except FileNotFoundError:
            return  # no procfs mountstats here (not Linux, or a sim node without NFS)
        # A mount stacked on the same path (a second mount of the export over the first) keeps the
        # hidden one listed; mount order puts the visible one last, and one series per label set
        # is all a scrape may carry.
        errors: list[str] = []
        mounts = host_mounts(parse_mountstats(text, errors), self.rootfs)
        for error in errors:
            once(log, logging.WARNING, "corrupt:" + error.partition(":")[0],  # one line per item
                 "%s: skipped a mount with a corrupt bytes line: %s", self.path, error)
        visible = {(m.mountpoint, m.fstype, m.device): m for m in mounts}
        for mount in visible.values():
            yield from mount_samples(mount)


@register("nfs", help="NFS client bytes (normal and direct) and RPC ops, retransmissions, RTT, execute time")
def nfs(config: ExporterConfig) -> NfsCollector:
    return NfsCollector(NfsOptions.from_config(config))
