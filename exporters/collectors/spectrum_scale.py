"""``spectrum-scale``: IBM Spectrum Scale (GPFS) client I/O per mounted file system from ``mmpmon -p``'s answer to
``fs_io_s`` (bytes, application reads and writes, opens, closes, readdirs, inode updates), as the storage
collectors' series (``lockstep_storage_*``, fstype ``gpfs``). mmpmon is run once per scrape through
``--spectrum-scale.mmpmon-command`` with the request on its standard input, bounded by
``--spectrum-scale.timeout`` even when it hangs on a stuck daemon. Off by default (``--collector.spectrum-scale``):
a node without Spectrum Scale has no mmpmon to run."""
from __future__ import annotations

import argparse
import logging
import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from lockstep.exporters.boundedcmd import BoundedCommand
from lockstep.exporters.catalog import storage as m
from lockstep.exporters.config import ExporterConfig
from lockstep.exporters.readfile import read_text
from lockstep.exporters.registry import add_flag, register
from lockstep.exporters.storage.mmpmon import FsIo, parse_fs_io_s
from lockstep.exporters.storage.mounts import Mount, host_mounts, parse_mounts
from lockstep.exporters.toolkit.logs import once
from lockstep.exporters.toolkit.sample import Sample

log = logging.getLogger("lockstep.collector.spectrum_scale")
DEFAULT_COMMAND = "/usr/lpp/mmfs/bin/mmpmon -p -s"
REQUEST = "fs_io_s\n"


@dataclass(frozen=True)
class SpectrumScaleOptions:
    procfs: Path
    rootfs: Path = Path("/")
    command: tuple[str, ...] = tuple(shlex.split(DEFAULT_COMMAND))
    timeout: float = 5.0

    @staticmethod
    def add_flags(group: argparse._ArgumentGroup) -> None:
        add_flag(group, "spectrum-scale.mmpmon-command",
                 help=f"mmpmon to run, reading its requests on stdin (default {DEFAULT_COMMAND!r})")
        add_flag(group, "spectrum-scale.timeout", type=float, help="seconds before mmpmon is killed (default 5)")

    @classmethod
    def from_config(cls, config: ExporterConfig) -> "SpectrumScaleOptions":
        try:
            command = tuple(shlex.split(config.flag("spectrum-scale.mmpmon-command", DEFAULT_COMMAND)))
        except ValueError as exc:
            raise ValueError(f"--spectrum-scale.mmpmon-command: {exc}") from None
        if not command:
            raise ValueError("--spectrum-scale.mmpmon-command is empty")
        timeout = float(config.flag("spectrum-scale.timeout", 5.0))
        if timeout <= 0:
            raise ValueError(f"--spectrum-scale.timeout must be > 0, got {timeout}")
        return cls(config.procfs, config.rootfs, command, timeout)


def gpfs_mountpoint(fsname: str, mounts: list[Mount]) -> str | None:
    """The mount point of GPFS file system ``fsname`` (the mount table names the device ``fsname`` or
    ``/dev/fsname``), if exactly one."""
    found = {mt.mountpoint for mt in mounts if mt.fstype == "gpfs" and os.path.basename(mt.device) == fsname}
    return found.pop() if len(found) == 1 else None


def fs_samples(labels: tuple[str, str, str], fs: FsIo) -> list[Sample]:
    out = [Sample(m.READ_BYTES, labels, float(fs.read_bytes)), Sample(m.WRITE_BYTES, labels, float(fs.write_bytes)),
           Sample(m.READ_CALLS, labels, float(fs.reads)), Sample(m.WRITE_CALLS, labels, float(fs.writes))]
    for op, count in (("open", fs.opens), ("close", fs.closes), ("readdir", fs.readdirs),
                      ("inode_update", fs.inode_updates)):
        out.append(Sample(m.METADATA_OPS, labels + (op,), float(count)))
    return out


class SpectrumScaleCollector:
    def __init__(self, options: SpectrumScaleOptions) -> None:
        self.options = options
        self.mmpmon = BoundedCommand(options.command, options.timeout, stdin=REQUEST)

    def collect(self) -> list[Sample]:
        errors: list[str] = []
        filesystems = parse_fs_io_s(self.mmpmon.run(), errors)   # a failed or hung mmpmon fails this collector alone
        for error in errors:
            once(log, logging.WARNING, "fs:" + error.partition(":")[0], "mmpmon fs_io_s: skipped %s", error)
        mounts = self._mounts() if filesystems else []
        out: list[Sample] = []
        for fs in filesystems:
            out.extend(fs_samples((gpfs_mountpoint(fs.fsname, mounts) or fs.fsname, "gpfs", fs.fsname), fs))
        return out

    def _mounts(self) -> list[Mount]:
        try:
            text = read_text(os.path.join(self.options.procfs, "self", "mounts"))
        except OSError:
            return []
        return host_mounts(parse_mounts(text, "gpfs"), str(self.options.rootfs))


@register("spectrum-scale", default_enabled=False, add_flags=SpectrumScaleOptions.add_flags,
          help="IBM Spectrum Scale (GPFS) client I/O per file system from mmpmon fs_io_s (bounded, off by default)")
def spectrum_scale(config: ExporterConfig) -> SpectrumScaleCollector:
    return SpectrumScaleCollector(SpectrumScaleOptions.from_config(config))
