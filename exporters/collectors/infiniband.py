"""``infiniband``: port counters, state, rate and static facts of every RDMA device under
``<sysfs>/class/infiniband`` (InfiniBand, RoCE, Omni-Path and iWARP ports alike)."""
from __future__ import annotations

import argparse
import fnmatch
import functools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, NamedTuple, Sequence

from lockstep.exporters.catalog import fabric as m
from lockstep.exporters.catalog.enums import IB_PORT_ACTIVE
from lockstep.exporters.catalog.model import Metric
from lockstep.exporters.config import ExporterConfig
from lockstep.exporters.fabric import ib
from lockstep.exporters.fabric.device_scan import DeviceScan
from lockstep.exporters.fabric.topology import IbDevice, IbPort, rails
from lockstep.exporters.registry import add_flag, register
from lockstep.exporters.toolkit.logs import once
from lockstep.exporters.toolkit.sample import Sample, new_sample

log = logging.getLogger("lockstep.collector.infiniband")

COUNTERS = {
    "port_xmit_data": m.IB_TRANSMIT_BYTES, "port_rcv_data": m.IB_RECEIVE_BYTES,
    "port_xmit_packets": m.IB_TRANSMIT_PACKETS, "port_rcv_packets": m.IB_RECEIVE_PACKETS,
    "port_xmit_wait": m.IB_TRANSMIT_WAIT, "symbol_error": m.IB_SYMBOL_ERRORS, "link_downed": m.IB_LINK_DOWNED,
    "link_error_recovery": m.IB_LINK_ERROR_RECOVERY, "port_rcv_errors": m.IB_RECEIVE_ERRORS,
    "port_xmit_discards": m.IB_TRANSMIT_DISCARDS,
    "port_rcv_remote_physical_errors": m.IB_RECEIVE_REMOTE_PHYSICAL_ERRORS,
    "port_rcv_switch_relay_errors": m.IB_RECEIVE_SWITCH_RELAY_ERRORS,
    "local_link_integrity_errors": m.IB_LOCAL_LINK_INTEGRITY_ERRORS,
    "excessive_buffer_overrun_errors": m.IB_EXCESSIVE_BUFFER_OVERRUN_ERRORS, "VL15_dropped": m.IB_VL15_DROPPED,
    "port_xmit_constraint_errors": m.IB_TRANSMIT_CONSTRAINT_ERRORS,
    "port_rcv_constraint_errors": m.IB_RECEIVE_CONSTRAINT_ERRORS,
}


@dataclass(frozen=True)
class InfinibandOptions:
    sysfs: Path
    expected_rates: tuple[tuple[str, float], ...] = ()  # (device glob, bytes/s), first match wins

    @staticmethod
    def add_flags(group: argparse._ArgumentGroup) -> None:
        add_flag(group, "infiniband.expected-rate", action="append", metavar="GLOB=GBPS",
                 help="expected link rate per device glob, e.g. 'mlx5_*=400' (Gb/s); "
                      "ports below it report lockstep_ib_port_link_degraded 1")

    @classmethod
    def from_config(cls, config: ExporterConfig) -> "InfinibandOptions":
        return cls(config.sysfs, parse_expected_rates(config.flag("infiniband.expected-rate", ())))

    def expected_rate(self, device: str) -> float | None:
        return next((rate for pattern, rate in self.expected_rates if fnmatch.fnmatchcase(device, pattern)), None)


def parse_expected_rates(values: Sequence[str]) -> tuple[tuple[str, float], ...]:
    """``--infiniband.expected-rate='mlx5_*=400'`` (Gb/s; repeat the flag or separate with commas)."""
    rates = []
    for item in (part.strip() for value in values for part in value.split(",")):
        pattern, sep, gbps = item.partition("=")
        try:
            rate = float(gbps) * 1e9 / 8
        except ValueError:
            rate = -1.0
        if not sep or not pattern or rate <= 0:
            raise ValueError(f"--infiniband.expected-rate: expected DEVICE_GLOB=GBPS (e.g. mlx5_*=400), got {item!r}")
        rates.append((pattern, rate))
    return tuple(rates)


class _Counter(NamedTuple):
    """One counter a port reads each scrape, with its path and saturation sample built once."""

    path: str
    metric: Metric
    pinned: int | None
    scale: int
    flag: Sample                 # lockstep_ib_port_counter_saturated 1 for this counter
    fallback: _Counter | None    # the counters/ file behind a counters_ext/ one


@dataclass(frozen=True)
class _PortPlan:
    """What one port reads each scrape, with paths and label tuples built once."""

    labels: tuple[str, str]
    state: str
    phys_state: str
    rate: str
    counters: tuple[_Counter, ...]
    expected_rate: float | None


# A port's state and rate texts take a handful of values: their parse is cached (errors are not).
@functools.lru_cache(maxsize=64)
def _state(raw: bytes) -> float:
    return float(ib.parse_state(raw.decode(errors="replace")).id)


@functools.lru_cache(maxsize=64)
def _rate(raw: bytes) -> float:
    return ib.parse_rate(raw.decode(errors="replace"))


class InfinibandCollector:
    def __init__(self, options: InfinibandOptions) -> None:
        self.options = options
        self.scan = DeviceScan(options.sysfs)
        self._plans: list[_PortPlan] = []
        self._static: list[Sample] = []

    def _rebuild(self, devices: tuple[IbDevice, ...]) -> None:
        rail = rails(devices)
        self._static, self._plans = [], []
        for device in devices:
            self._static.append(Sample(m.IB_DEVICE_INFO, (device.name, device.board_id or "",
                                                          device.firmware or "", device.hca_type or ""), 1.0))
            for netdev in device.netdevs or ("",):
                self._static.append(Sample(m.RAIL_INFO, (device.name, netdev, str(rail[device.name])), 1.0))
            for port in device.ports:
                self._plans.append(self._plan(port))
                if port.link_layer:
                    self._static.append(Sample(m.IB_PORT_INFO, (device.name, port.port, port.link_layer), 1.0))

    def _plan(self, port: IbPort) -> _PortPlan:
        labels = (port.device, port.port)

        def counter(file: ib.CounterFile | None) -> _Counter | None:
            if file is None:
                return None
            flag = Sample(m.IB_COUNTER_SATURATED, (*labels, file.name), 1.0)
            return _Counter(f"{port.path}/{file.file}", COUNTERS[file.name], file.pinned, file.scale, flag,
                            counter(file.fallback))

        files = ib.plan_counters(port.counters, port.counters_ext)
        return _PortPlan(labels, f"{port.path}/state", f"{port.path}/phys_state", f"{port.path}/rate",
                         tuple(counter(f) for f in files if f.name in COUNTERS),
                         self.options.expected_rate(port.device))

    def collect(self) -> Iterable[Sample]:
        devices = self.scan.refresh()
        if devices is not None:
            self._rebuild(devices)
        out = list(self._static)
        for plan in self._plans:
            self._port(plan, out)
        return out

    def _port(self, plan: _PortPlan, out: list[Sample]) -> None:
        labels = plan.labels
        state = self._attribute(plan.state, _state, m.IB_STATE, labels, out)
        self._attribute(plan.phys_state, _state, m.IB_PHYS_STATE, labels, out)
        rate = self._attribute(plan.rate, _rate, m.IB_RATE, labels, out)
        if plan.expected_rate is not None:
            out.append(Sample(m.IB_EXPECTED_RATE, labels, plan.expected_rate))
            if rate is not None and state is not None:
                degraded = state == IB_PORT_ACTIVE and rate < plan.expected_rate
                out.append(Sample(m.IB_LINK_DEGRADED, labels, 1.0 if degraded else 0.0))
        self._counters(plan, out)

    def _attribute(self, path: str, parse: Callable[[bytes], float], metric: Metric, labels: tuple[str, str],
                   out: list[Sample]) -> float | None:
        raw = self.scan.files.read(path)
        if raw is None:
            return None
        try:
            value = parse(raw)
        except ValueError as exc:
            once(log, logging.WARNING, path, "malformed %s: %s", path, exc)
            return None
        out.append(new_sample((metric, labels, value)))
        return value

    def _counters(self, plan: _PortPlan, out: list[Sample]) -> None:
        read, labels, flagged = self.scan.files.read, plan.labels, []
        for counter in plan.counters:
            raw = read(counter.path)
            try:
                value = int(raw)
            except (TypeError, ValueError):  # absent (None), "N/A (no PMA)" or garbage: the rare paths
                counter, value = self._fallback(counter, raw)
                if value is None:
                    continue
            if value == counter.pinned:
                flagged.append(counter.flag)
            else:
                out.append(new_sample((counter.metric, labels, float(value * counter.scale))))
        if flagged:
            out.extend(sorted(flagged, key=lambda sample: sample.labels))

    def _fallback(self, counter: _Counter, raw: bytes | None) -> tuple[_Counter, int | None]:
        """The value of a counter whose file did not hold a number, from its fallback file if it has one."""
        value = _counter_value(counter.path, raw)
        if value is None and counter.fallback is not None:
            counter = counter.fallback
            value = _counter_value(counter.path, self.scan.files.read(counter.path))
        return counter, value

    def close(self) -> None:
        self.scan.close()


def _counter_value(path: str, raw: bytes | None) -> int | None:
    if raw is None:
        return None
    try:
        return ib.parse_counter(raw)
    except ValueError:
        once(log, logging.WARNING, path, "malformed counter %s", path)
        return None


@register("infiniband", help="InfiniBand/RoCE port counters, state and rate from sysfs",
          add_flags=InfinibandOptions.add_flags)
def factory(config: ExporterConfig) -> InfinibandCollector:
    return InfinibandCollector(InfinibandOptions.from_config(config))
