"""``lustre``: Lustre client (llite) I/O and metadata statistics per mounted filesystem.

Sources, first that yields anything: ``--lustre.lctl-command`` output (``lctl get_param
llite.*.stats``, run once per scrape with a timeout), else ``<procfs>/fs/lustre/llite/*/stats``
(old clients) and ``<sysfs>/kernel/debug/lustre/llite/*/stats`` (>= 2.12, readable by root only)."""
from __future__ import annotations

import logging
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from exporters.catalog import storage as m
from exporters.config import ExporterConfig
from exporters.logs import once
from exporters.registry import register
from exporters.sample import Sample
from exporters.storage.llite import LliteStats, fsname_of, parse_lctl_stats, parse_llite_stats
from exporters.storage.mounts import Mount, lustre_mountpoint, parse_mounts

log = logging.getLogger("lockstep.collector.lustre")


@dataclass(frozen=True)
class LustreOptions:
    procfs: Path
    sysfs: Path
    lctl_command: tuple[str, ...] = ()
    lctl_timeout: float = 2.0

    @classmethod
    def from_config(cls, config: ExporterConfig) -> "LustreOptions":
        command = tuple(shlex.split(config.flag("lustre.lctl-command", "")))
        timeout = float(config.flag("lustre.lctl-timeout", 2.0))
        if timeout <= 0:
            raise ValueError(f"--lustre.lctl-timeout must be > 0, got {timeout}")
        return cls(config.procfs, config.sysfs, command, timeout)


def read_mounts(procfs: Path) -> list[Mount]:
    try:
        return parse_mounts((procfs / "self" / "mounts").read_text())
    except OSError:
        return []


class LustreCollector:
    def __init__(self, options: LustreOptions) -> None:
        self.options = options

    def _run_lctl(self) -> dict[str, LliteStats]:
        result = subprocess.run(self.options.lctl_command, capture_output=True, text=True,
                                timeout=self.options.lctl_timeout, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"{shlex.join(self.options.lctl_command)} exited {result.returncode}: "
                               f"{result.stderr.strip()[:200]}")
        return parse_lctl_stats(result.stdout)

    def _read_files(self) -> dict[str, LliteStats]:
        found: dict[str, LliteStats] = {}
        for root in (self.options.procfs / "fs/lustre/llite", self.options.sysfs / "kernel/debug/lustre/llite"):
            for path in sorted(root.glob("*/stats")):
                try:
                    found.setdefault(path.parent.name, parse_llite_stats(path.read_text()))
                except PermissionError:
                    once(log, logging.WARNING, str(root), "cannot read %s (debugfs needs root; or set "
                         "--lustre.lctl-command)", path)
                except FileNotFoundError:
                    pass  # unmounted between glob and read
        return found

    def collect(self) -> Iterable[Sample]:
        stats = self._run_lctl() if self.options.lctl_command else self._read_files()
        mounts = read_mounts(self.options.procfs) if stats else []
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


def _flags(group) -> None:
    group.add_argument("--lustre.lctl-command", dest="lustre.lctl-command", default=None,
                       help="read client stats from this command's output instead of procfs/debugfs, "
                            "e.g. 'lctl get_param llite.*.stats' (run once per scrape)")
    group.add_argument("--lustre.lctl-timeout", dest="lustre.lctl-timeout", type=float, default=None,
                       help="seconds before the lctl command is killed (default 2)")


@register("lustre", help="Lustre client llite stats: bytes, calls and metadata ops per filesystem",
          add_flags=_flags)
def lustre(config: ExporterConfig) -> LustreCollector:
    return LustreCollector(LustreOptions.from_config(config))
