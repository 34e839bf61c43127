"""``spectrum-scale``: IBM Spectrum Scale (GPFS) client I/O per mounted file system from ``mmpmon -p``'s answer to
``fs_io_s`` (bytes, application reads and writes, opens, closes, readdirs, inode updates), as the storage
collectors' series (``lockstep_storage_*``, fstype ``gpfs``). mmpmon is run once per scrape through
``--spectrum-scale.mmpmon-command`` with the request on its standard input, bounded by
``--spectrum-scale.timeout`` even when it hangs on a stuck daemon. Then the daemon's waiters from ``mmdiag --waiters
-Y`` (``--spectrum-scale.mmdiag-command``, same timeout; an empty command turns it off) as a stall signal: how many
threads wait now per class of reason, how many have waited longer than 0.1, 1, 10, 60 and 300 s, and the oldest
wait (``lockstep_gpfs_waiter*``). Either command failing keeps the other's series (the collector's success is then 0;
``lockstep_gpfs_waiters_success`` tells which). Long waits that are idle by design (the events exporter's sender
polling its socket, fsck's reaper) are left out by ``--spectrum-scale.waiters-exclude``. Off by default
(``--collector.spectrum-scale``): a node without Spectrum Scale has no mmpmon to run."""
from __future__ import annotations

import argparse
import logging
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from lockstep.exporters.boundedcmd import BoundedCommand
from lockstep.exporters.catalog import storage as m
from lockstep.exporters.config import ExporterConfig, number_flag
from lockstep.exporters.readfile import read_text
from lockstep.exporters.registry import add_flag, register
from lockstep.exporters.scrape import PartialFailure
from lockstep.exporters.storage.mmdiag import REASON_CLASSES, Waiter, parse_waiters, reason_class
from lockstep.exporters.storage.mmpmon import FsIo, parse_fs_io_s
from lockstep.exporters.storage.mounts import Mount, host_mounts, parse_mounts
from lockstep.exporters.toolkit.logs import once
from lockstep.exporters.toolkit.sample import Sample

log = logging.getLogger("lockstep.collector.spectrum_scale")
DEFAULT_COMMAND = "/usr/lpp/mmfs/bin/mmpmon -p -s"
REQUEST = "fs_io_s\n"
DEFAULT_MMDIAG = "/usr/lpp/mmfs/bin/mmdiag --waiters -Y"
# Threads whose long waits are idle by design, not stalls (the events exporter's sender polling its socket,
# fsck's reaper): the published answer has them at 44 s and 6862 s on a healthy node.
DEFAULT_EXCLUDE = "EventsExporterSenderThread|Fsck"
# "A waiter older than N s": 0.1 s is above a healthy disk I/O round trip (most I/O waiters in the published answer
# are shorter), 1 s is felt by a training step, 10 s stalls a step or a checkpoint, 60 s is a client that looks hung
# to the job, 300 s is one held as long as the job-stall alerts wait (5m) before they page.
AGE_THRESHOLDS = (0.1, 1.0, 10.0, 60.0, 300.0)


@dataclass(frozen=True)
class SpectrumScaleOptions:
    procfs: Path
    rootfs: Path = Path("/")
    command: tuple[str, ...] = tuple(shlex.split(DEFAULT_COMMAND))
    timeout: float = 5.0
    mmdiag: tuple[str, ...] = tuple(shlex.split(DEFAULT_MMDIAG))
    exclude: re.Pattern[str] | None = re.compile(DEFAULT_EXCLUDE)

    @staticmethod
    def add_flags(group: argparse._ArgumentGroup) -> None:
        add_flag(group, "spectrum-scale.mmpmon-command",
                 help=f"mmpmon to run, reading its requests on stdin (default {DEFAULT_COMMAND!r})")
        add_flag(group, "spectrum-scale.timeout", type=float,
                 help="seconds before mmpmon or mmdiag is killed (default 5)")
        add_flag(group, "spectrum-scale.mmdiag-command",
                 help=f"mmdiag printing the waiters, '' for none (default {DEFAULT_MMDIAG!r})")
        add_flag(group, "spectrum-scale.waiters-exclude",
                 help=f"regular expression of waiter thread names left out, '' for none (default {DEFAULT_EXCLUDE!r})")

    @classmethod
    def from_config(cls, config: ExporterConfig) -> "SpectrumScaleOptions":
        try:
            command = tuple(shlex.split(config.flag("spectrum-scale.mmpmon-command", DEFAULT_COMMAND)))
        except ValueError as exc:
            raise ValueError(f"--spectrum-scale.mmpmon-command: {exc}") from None
        if not command:
            raise ValueError("--spectrum-scale.mmpmon-command is empty")
        timeout = number_flag(config, "spectrum-scale.timeout", 5.0, above=0)
        try:
            mmdiag = tuple(shlex.split(config.flag("spectrum-scale.mmdiag-command", DEFAULT_MMDIAG)))
        except ValueError as exc:
            raise ValueError(f"--spectrum-scale.mmdiag-command: {exc}") from None
        pattern = config.flag("spectrum-scale.waiters-exclude", DEFAULT_EXCLUDE)
        try:
            exclude = re.compile(pattern) if pattern else None
        except re.error as exc:
            raise ValueError(f"--spectrum-scale.waiters-exclude: {exc}") from None
        return cls(config.procfs, config.rootfs, command, timeout, mmdiag, exclude)


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


def waiter_samples(waiters: list[Waiter]) -> list[Sample]:
    """The waiter series of one answer: every reason class and age threshold, zero where none."""
    per_class = dict.fromkeys(REASON_CLASSES, 0)
    for waiter in waiters:
        per_class[reason_class(waiter.reason)] += 1
    out = [Sample(m.GPFS_WAITERS_SUCCESS, (), 1.0)]
    out.extend(Sample(m.GPFS_WAITERS, (name,), float(count)) for name, count in per_class.items())
    out.extend(Sample(m.GPFS_WAITERS_OLDER_THAN, (f"{limit:g}",), float(sum(w.seconds > limit for w in waiters)))
               for limit in AGE_THRESHOLDS)
    out.append(Sample(m.GPFS_WAITER_OLDEST, (), max((w.seconds for w in waiters), default=0.0)))
    return out


class SpectrumScaleCollector:
    def __init__(self, options: SpectrumScaleOptions) -> None:
        self.options = options
        self.mmpmon = BoundedCommand(options.command, options.timeout, stdin=REQUEST)
        self.mmdiag = BoundedCommand(options.mmdiag, options.timeout) if options.mmdiag else None

    def collect(self) -> list[Sample]:
        """File system I/O, then waiters: a failed or hung command loses its own series alone."""
        failures: list[str] = []
        try:
            out = self._fs_io()
        except (RuntimeError, OSError) as exc:
            failures.append(f"mmpmon: {exc}")
            out = []
        if self.mmdiag is not None:
            try:
                out.extend(self._waiters(self.mmdiag.run()))
            except (RuntimeError, OSError) as exc:
                failures.append(f"mmdiag: {exc}")
                out.append(Sample(m.GPFS_WAITERS_SUCCESS, (), 0.0))
        if failures:
            raise PartialFailure("; ".join(failures), out)
        return out

    def _waiters(self, text: str) -> list[Sample]:
        errors: list[str] = []
        waiters = parse_waiters(text, errors)
        for error in errors:
            once(log, logging.WARNING, "waiter:" + error.partition(":")[0], "mmdiag --waiters: skipped %s", error)
        exclude = self.options.exclude
        return waiter_samples([w for w in waiters if exclude is None or not exclude.search(w.thread)])

    def _fs_io(self) -> list[Sample]:
        errors: list[str] = []
        filesystems = parse_fs_io_s(self.mmpmon.run(), errors)
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
          help="IBM Spectrum Scale (GPFS) client I/O per file system from mmpmon fs_io_s and waiters from mmdiag "
               "--waiters (bounded, off by default)")
def spectrum_scale(config: ExporterConfig) -> SpectrumScaleCollector:
    return SpectrumScaleCollector(SpectrumScaleOptions.from_config(config))
