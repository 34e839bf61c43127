"""``lustre``: Lustre client (llite) I/O and metadata statistics per mounted filesystem.

Sources, first that yields anything: ``--lustre.lctl-command`` output (``lctl get_param
llite.*.stats``, run once per scrape, bounded even when lctl hangs), else
``<procfs>/fs/lustre/llite/*/stats`` (old clients) and ``<sysfs>/kernel/debug/lustre/llite/*/stats``
(>= 2.12, readable by root only). Mount point labels come from ``<procfs>/self/mounts``, the mounts
under ``--path.rootfs`` (the host's, when the agent runs in a container)."""
from __future__ import annotations

import argparse
import logging
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from lockstep.exporters.boundedcmd import KILL_GRACE_S, BoundedCommand  # noqa: F401 (KILL_GRACE_S: the tests' API)
from lockstep.exporters.catalog import storage as m
from lockstep.exporters.config import ExporterConfig, number_flag
from lockstep.exporters.readfile import read_text
from lockstep.exporters.registry import add_flag, register
from lockstep.exporters.storage.llite import LliteStats, fsname_of, parse_lctl_stats, parse_llite_stats
from lockstep.exporters.storage.mounts import Mount, host_mounts, lustre_mountpoint, parse_mounts
from lockstep.exporters.toolkit.logs import once
from lockstep.exporters.toolkit.sample import Sample

log = logging.getLogger("lockstep.collector.lustre")


@dataclass(frozen=True)
class LustreOptions:
    procfs: Path
    sysfs: Path
    rootfs: Path = Path("/")
    lctl_command: tuple[str, ...] = ()
    lctl_timeout: float = 2.0

    @staticmethod
    def add_flags(group: argparse._ArgumentGroup) -> None:
        add_flag(group, "lustre.lctl-command",
                 help="read client stats from this command's output instead of procfs/debugfs, "
                      "e.g. 'lctl get_param llite.*.stats' (run once per scrape)")
        add_flag(group, "lustre.lctl-timeout", type=float,
                 help="seconds before the lctl command is killed (default 2)")

    @classmethod
    def from_config(cls, config: ExporterConfig) -> "LustreOptions":
        try:
            command = tuple(shlex.split(config.flag("lustre.lctl-command", "")))
        except ValueError as exc:  # unbalanced quotes
            raise ValueError(f"--lustre.lctl-command: {exc}") from None
        timeout = number_flag(config, "lustre.lctl-timeout", 2.0, above=0)
        return cls(config.procfs, config.sysfs, config.rootfs, command, timeout)


def read_mounts(procfs: Path, rootfs: Path = Path("/")) -> list[Mount]:
    try:
        text = read_text(os.path.join(procfs, "self", "mounts"))
    except OSError:
        return []
    return host_mounts(parse_mounts(text, "lustre"), str(rootfs))


class LustreCollector:
    def __init__(self, options: LustreOptions) -> None:
        self.options = options
        self.lctl = BoundedCommand(options.lctl_command, options.lctl_timeout)
        self.roots = (os.path.join(options.procfs, "fs/lustre/llite"),
                      os.path.join(options.sysfs, "kernel/debug/lustre/llite"))

    def _read_files(self) -> dict[str, LliteStats]:
        found: dict[str, LliteStats] = {}
        for root in self.roots:
            try:
                instances = sorted(os.listdir(root))
            except OSError:
                continue  # no Lustre client, or debugfs (root only) on any node: nothing to warn about
            for instance in instances:
                path = os.path.join(root, instance, "stats")
                try:
                    found.setdefault(instance, parse_llite_stats(read_text(path)))
                except PermissionError:
                    once(log, logging.WARNING, root, "cannot read %s (debugfs needs root; or set "
                         "--lustre.lctl-command)", path)
                except (FileNotFoundError, NotADirectoryError):
                    pass  # unmounted between listing and read, or not an instance directory
        return found

    def collect(self) -> Iterable[Sample]:
        stats = parse_lctl_stats(self.lctl.run()) if self.options.lctl_command else self._read_files()
        mounts = read_mounts(self.options.procfs, self.options.rootfs) if stats else []
        for instance, s in sorted(stats.items()):
            fsname = fsname_of(instance)
            # The instance name is unique where the mount point is not resolvable (the same
            # filesystem mounted twice, or no mount table in this namespace).
            labels = (lustre_mountpoint(fsname, mounts) or instance, "lustre", fsname)
            yield from samples(labels, s)


def samples(labels: tuple[str, str, str], s: LliteStats) -> Iterable[Sample]:
    for metric, value in ((m.READ_BYTES, s.read_bytes), (m.WRITE_BYTES, s.write_bytes),
                          (m.READ_CALLS, s.read_calls), (m.WRITE_CALLS, s.write_calls)):
        if value is not None:
            yield Sample(metric, labels, float(value))
    for op, count in s.metadata_ops:
        yield Sample(m.METADATA_OPS, labels + (op,), float(count))


@register("lustre", help="Lustre client llite stats: bytes, calls and metadata ops per filesystem",
          add_flags=LustreOptions.add_flags)
def lustre(config: ExporterConfig) -> LustreCollector:
    return LustreCollector(LustreOptions.from_config(config))
