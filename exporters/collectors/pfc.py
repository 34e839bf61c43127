"""``pfc``: per-priority PFC pause frames and pause duration in both directions, and pause-storm
watchdog events, from NIC driver statistics (``ethtool -S``) mapped through ``fabric.pfc_table``."""
from __future__ import annotations

import argparse
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from lockstep.exporters.config import ExporterConfig, regex_flag
from lockstep.exporters.fabric.ethtool import DirEthtool, Ethtool, NicStats
from lockstep.exporters.fabric.pfc_table import Slot, infer_driver, plan
from lockstep.exporters.fabric.topology import class_dir, listing
from lockstep.exporters.registry import add_flag, register
from lockstep.exporters.toolkit.logs import once
from lockstep.exporters.toolkit.sample import Sample, new_sample

log = logging.getLogger("lockstep.collector.pfc")


@dataclass(frozen=True)
class PfcOptions:
    source: str | Path                    # "ioctl" or the directory of <iface>/statistics files
    interfaces: re.Pattern[str] | None    # None: RDMA netdevs (ioctl) or every directory (dir)
    sysfs: Path

    @staticmethod
    def add_flags(group: argparse._ArgumentGroup) -> None:
        add_flag(group, "pfc.source", metavar="ioctl|dir:PATH",
                 help="where driver statistics come from: the ethtool ioctl, or PATH/<iface>/statistics "
                      "files in `ethtool -S` format (default: ioctl)")
        add_flag(group, "pfc.interfaces", metavar="REGEX",
                 help="interfaces to read (full match); default: those backing an RDMA device (ioctl) "
                      "or every interface directory (dir)")

    @classmethod
    def from_config(cls, config: ExporterConfig) -> "PfcOptions":
        source = config.flag("pfc.source", "ioctl")
        if source != "ioctl" and not source.startswith("dir:"):
            raise ValueError(f"--pfc.source: expected 'ioctl' or 'dir:PATH', got {source!r}")
        pattern = config.flag("pfc.interfaces")
        regex = regex_flag("pfc.interfaces", pattern) if pattern else None
        return cls(source if source == "ioctl" else Path(source[4:]), regex, config.sysfs)


def rdma_netdevs(sysfs: Path) -> list[str]:
    """Interfaces backing an RDMA device: ``<sysfs>/class/infiniband/*/device/net/*``."""
    base, found = class_dir(sysfs), set()
    for device in listing(sysfs):
        try:
            found.update(os.listdir(os.path.join(base, device, "device", "net")))
        except OSError:
            continue
    return sorted(found)


class PfcCollector:
    def __init__(self, ethtool: Ethtool, options: PfcOptions) -> None:
        self.ethtool = ethtool
        self.options = options
        self._plans: dict[str, tuple[tuple[str, ...], tuple[Slot, ...] | None]] = {}
        self._labels: dict[str, tuple[tuple[str, ...], ...]] = {}  # the series labels of each slot
        self._seen: set[str] = set()  # the interfaces selected last scrape

    def selected(self) -> list[str]:
        regex = self.options.interfaces
        if regex is not None:
            return [name for name in self.ethtool.interfaces() if regex.fullmatch(name)]
        if self.options.source == "ioctl":
            return rdma_netdevs(self.options.sysfs)
        return self.ethtool.interfaces()

    def collect(self) -> Iterable[Sample]:
        out: list[Sample] = []
        selected = self.selected()
        self._forget_gone(selected)
        for interface in selected:
            try:
                self._interface(interface, out)
            except (ValueError, OSError) as exc:  # a malformed file or a failing ioctl loses that interface only
                # Keyed by kind, not text: the text quotes the bad line, which can differ every scrape.
                kind = f"{type(exc).__name__}:{getattr(exc, 'errno', '')}"
                once(log, logging.WARNING, f"{interface}:{kind}", "unreadable statistics of %s: %s", interface, exc)
        return out

    def _forget_gone(self, selected: list[str]) -> None:
        """Interface names churn (VFs, veths): state of the ones gone would otherwise pile up."""
        now = set(selected)
        gone, self._seen = self._seen - now, now
        for interface in gone:
            self._plans.pop(interface, None)
            self._labels.pop(interface, None)
            self.ethtool.forget(interface)

    def _interface(self, interface: str, out: list[Sample]) -> None:
        stats = self.ethtool.stats(interface)
        if stats is None:
            return
        known = self._plans.get(interface)
        if known is None or (known[0] is not stats.names and known[0] != stats.names):
            known = self._replan(interface, stats)
        slots = known[1]
        if slots is None:
            once(log, logging.DEBUG, f"driver:{interface}:{stats.driver}",
                 "no PFC counter table for driver %s; interface %s skipped", stats.driver or "unknown", interface)
            return
        values = stats.values
        for slot, labels in zip(slots, self._labels[interface]):
            out.append(new_sample((slot.metric, labels, values[slot.index] / slot.divisor)))

    def _replan(self, interface: str, stats: NicStats) -> tuple[tuple[str, ...], tuple[Slot, ...] | None]:
        slots = plan(stats.driver or "", stats.names)
        self._labels[interface] = tuple((interface, *slot.labels) for slot in slots or ())
        known = self._plans[interface] = (stats.names, slots)
        return known

    def close(self) -> None:
        self.ethtool.close()


def make_ethtool(options: PfcOptions) -> Ethtool:
    if options.source == "ioctl":
        from lockstep.exporters.fabric.ethtool_ioctl import IoctlEthtool
        return IoctlEthtool()
    return DirEthtool(Path(options.source), infer_driver)


@register("pfc", help="PFC pause frames, pause duration and pause-storm events per interface and priority",
          add_flags=PfcOptions.add_flags)
def factory(config: ExporterConfig) -> PfcCollector:
    options = PfcOptions.from_config(config)
    return PfcCollector(make_ethtool(options), options)
