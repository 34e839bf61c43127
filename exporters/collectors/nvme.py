"""``nvme``: local NVMe controllers: identity from ``<sysfs>/class/nvme/nvme*`` (model, serial, firmware; no root
needed) and, with ``--nvme.smart-command``, the SMART / health log per controller (wear, spare, media errors,
critical warning bits, temperature). The log page is an admin command that needs root on the controller's
device, so it is read through a command (``nvme smart-log -o json {device}`` or ``smartctl -j -a {device}``),
each run bounded by ``--nvme.smart-timeout`` and at most once per ``--nvme.smart-interval`` per controller; one
controller whose command fails, hangs or answers garbage loses its own health series alone."""
from __future__ import annotations

import argparse
import logging
import os
import re
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

from lockstep.exporters.boundedcmd import BoundedCommand
from lockstep.exporters.catalog import storage as m
from lockstep.exporters.config import ExporterConfig, number_flag
from lockstep.exporters.readfile import read_text
from lockstep.exporters.registry import add_flag, register
from lockstep.exporters.storage.nvmesmart import DATA_UNIT_BYTES, WARNING_BITS, NvmeHealth, parse_smart_log
from lockstep.exporters.toolkit.logs import once
from lockstep.exporters.toolkit.sample import Sample

log = logging.getLogger("lockstep.collector.nvme")
_CONTROLLER = re.compile(r"^nvme\d+$")


@dataclass(frozen=True)
class NvmeOptions:
    sysfs: Path
    smart_command: tuple[str, ...] = ()
    smart_timeout: float = 5.0
    smart_interval: float = 60.0

    @staticmethod
    def add_flags(group: argparse._ArgumentGroup) -> None:
        add_flag(group, "nvme.smart-command",
                 help="command printing a controller's SMART log as JSON, {device} replaced by /dev/nvmeN, e.g. "
                      "'nvme smart-log -o json {device}' or 'smartctl -j -a {device}' (needs root; default: none, "
                      "identity only)")
        add_flag(group, "nvme.smart-timeout", type=float, help="seconds before the command is killed (default 5)")
        add_flag(group, "nvme.smart-interval", type=float,
                 help="seconds between two reads of one controller's log (default 60; the log changes slowly)")

    @classmethod
    def from_config(cls, config: ExporterConfig) -> "NvmeOptions":
        try:
            command = tuple(shlex.split(config.flag("nvme.smart-command", "")))
        except ValueError as exc:
            raise ValueError(f"--nvme.smart-command: {exc}") from None
        if command and not any("{device}" in arg for arg in command):
            raise ValueError("--nvme.smart-command must name the controller as {device}")
        timeout = number_flag(config, "nvme.smart-timeout", 5.0, above=0)
        interval = number_flag(config, "nvme.smart-interval", 60.0, at_least=0)
        return cls(config.sysfs, command, timeout, interval)


def health_samples(controller: str, h: NvmeHealth) -> list[Sample]:
    labels = (controller,)
    out = [Sample(m.NVME_PERCENTAGE_USED, labels, h.percentage_used_ratio),
           Sample(m.NVME_AVAILABLE_SPARE, labels, h.available_spare_ratio),
           Sample(m.NVME_AVAILABLE_SPARE_THRESHOLD, labels, h.available_spare_threshold_ratio),
           Sample(m.NVME_MEDIA_ERRORS, labels, float(h.media_errors))]
    out += [Sample(m.NVME_CRITICAL_WARNING, (controller, bit), float(h.warning(i))) for i, bit in enumerate(WARNING_BITS)]
    if h.temperature_celsius is not None:
        out.append(Sample(m.NVME_TEMPERATURE, labels, round(h.temperature_celsius, 2)))
    if h.data_units_read is not None:
        out.append(Sample(m.NVME_READ_BYTES, labels, float(h.data_units_read * DATA_UNIT_BYTES)))
    if h.data_units_written is not None:
        out.append(Sample(m.NVME_WRITTEN_BYTES, labels, float(h.data_units_written * DATA_UNIT_BYTES)))
    return out


class NvmeCollector:
    def __init__(self, options: NvmeOptions) -> None:
        self.options = options
        self.root = os.path.join(options.sysfs, "class", "nvme")
        self._identity: dict[str, tuple[str, str, str]] = {}      # static: read once per controller
        self._runners: dict[str, BoundedCommand] = {}
        self._health: dict[str, tuple[float, list[Sample] | None]] = {}   # controller → (read at, samples or failed)

    def collect(self) -> list[Sample]:
        try:
            controllers = sorted(c for c in os.listdir(self.root) if _CONTROLLER.match(c))
        except OSError:
            return []   # no NVMe controller here
        out: list[Sample] = []
        for c in controllers:
            out.append(Sample(m.NVME_INFO, (c,) + self._ident(c), 1.0))
            if self.options.smart_command:
                health = self._read_health(c)
                out.append(Sample(m.NVME_SMART_SUCCESS, (c,), 0.0 if health is None else 1.0))
                out.extend(health or ())
        return out

    def _ident(self, controller: str) -> tuple[str, str, str]:
        if controller not in self._identity:
            values = []
            for attr in ("model", "serial", "firmware_rev"):
                try:
                    values.append(read_text(os.path.join(self.root, controller, attr)).strip())
                except OSError:
                    values.append("")
            self._identity[controller] = (values[0], values[1], values[2])
        return self._identity[controller]

    def _read_health(self, controller: str) -> list[Sample] | None:
        read_at, cached = self._health.get(controller, (-self.options.smart_interval - 1, None))
        if time.monotonic() - read_at < self.options.smart_interval:
            return cached
        device = f"/dev/{controller}"
        if controller not in self._runners:
            command = tuple(arg.replace("{device}", device) for arg in self.options.smart_command)
            self._runners[controller] = BoundedCommand(command, self.options.smart_timeout)
        try:
            health: list[Sample] | None = health_samples(controller, parse_smart_log(self._runners[controller].run()))
        except (OSError, RuntimeError, ValueError) as exc:
            once(log, logging.WARNING, "smart:" + controller, "%s: SMART log unavailable: %s", device, exc)
            health = None
        self._health[controller] = (time.monotonic(), health)
        return health


@register("nvme", help="local NVMe controllers: identity, and with --nvme.smart-command wear, spare, media errors, "
                       "critical warnings and temperature", add_flags=NvmeOptions.add_flags)
def nvme(config: ExporterConfig) -> NvmeCollector:
    return NvmeCollector(NvmeOptions.from_config(config))
