"""``infiniband``: port counters, state, rate and static facts of every RDMA device under
``<sysfs>/class/infiniband`` (InfiniBand, RoCE, Omni-Path and iWARP ports alike)."""
from __future__ import annotations

import argparse
import fnmatch
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from exporters.catalog import fabric as m
from exporters.catalog.model import Metric
from exporters.config import ExporterConfig
from exporters.fabric import ib
from exporters.fabric.device_scan import DeviceScan
from exporters.fabric.topology import IbDevice, IbPort, rails
from exporters.logs import once
from exporters.registry import register
from exporters.sample import Sample

log = logging.getLogger("lockstep.collector.infiniband")
ACTIVE = 4  # state "4: ACTIVE"

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
class Options:
    sysfs: Path
    expected_rates: tuple[tuple[str, float], ...] = ()  # (device glob, bytes/s), first match wins

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


@dataclass(frozen=True)
class _PortPlan:
    """What one port reads each scrape, with label tuples built once."""

    labels: tuple[str, str]
    path: str
    counters: tuple[tuple[str, str], ...]      # (name, path) of mapped counters/ files
    counters_ext: tuple[tuple[str, str], ...]  # (name, path) of counters_ext/ files that replace them
    expected_rate: float | None


class InfinibandCollector:
    def __init__(self, options: Options) -> None:
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
        counters = tuple((n, f"{port.path}/counters/{n}") for n in port.counters if n in COUNTERS)
        ext = tuple((n, f"{port.path}/counters_ext/{n}") for n in port.counters_ext
                    if ib.EXT_REPLACES.get(n) in COUNTERS)
        expected = self.options.expected_rate(port.device)
        return _PortPlan((port.device, port.port), port.path, counters, ext, expected)

    def collect(self) -> Iterable[Sample]:
        devices = self.scan.refresh()
        if devices is not None:
            self._rebuild(devices)
        out = list(self._static)
        for plan in self._plans:
            self._port(plan, out)
        return out

    def _port(self, plan: _PortPlan, out: list[Sample]) -> None:
        read, labels = self.scan.files.read, plan.labels
        state = self._state(plan, "state", m.IB_STATE, out)
        self._state(plan, "phys_state", m.IB_PHYS_STATE, out)
        rate = self._rate(plan, out)
        if plan.expected_rate is not None:
            out.append(Sample(m.IB_EXPECTED_RATE, labels, plan.expected_rate))
            if rate is not None and state is not None:
                degraded = state == ACTIVE and rate < plan.expected_rate
                out.append(Sample(m.IB_LINK_DEGRADED, labels, 1.0 if degraded else 0.0))
        counters = ib.parse_port_counters({n: read(p) for n, p in plan.counters},
                                          {n: read(p) for n, p in plan.counters_ext})
        for name, value in counters.values.items():
            out.append(Sample(COUNTERS[name], labels, float(value)))
        for name in counters.saturated:
            out.append(Sample(m.IB_COUNTER_SATURATED, (*labels, name), 1.0))
        for name in counters.malformed:
            once(log, logging.WARNING, f"{plan.path}/{name}", "malformed counter %s/%s", plan.path, name)

    def _state(self, plan: _PortPlan, attr: str, metric: Metric, out: list[Sample]) -> int | None:
        raw = self.scan.files.read(f"{plan.path}/{attr}")
        if raw is None:
            return None
        try:
            state = ib.parse_state(raw.decode(errors="replace"))
        except ValueError as exc:
            once(log, logging.WARNING, f"{plan.path}/{attr}", "malformed %s/%s: %s", plan.path, attr, exc)
            return None
        out.append(Sample(metric, plan.labels, float(state.id)))
        return state.id

    def _rate(self, plan: _PortPlan, out: list[Sample]) -> float | None:
        raw = self.scan.files.read(f"{plan.path}/rate")
        if raw is None:
            return None
        try:
            rate = ib.parse_rate(raw.decode(errors="replace"))
        except ValueError as exc:
            once(log, logging.WARNING, f"{plan.path}/rate", "malformed %s/rate: %s", plan.path, exc)
            return None
        out.append(Sample(m.IB_RATE, plan.labels, rate))
        return rate

    def close(self) -> None:
        self.scan.close()


def add_flags(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--infiniband.expected-rate", dest="infiniband.expected-rate", action="append", default=None,
                       metavar="GLOB=GBPS", help="expected link rate per device glob, e.g. 'mlx5_*=400' (Gb/s); "
                       "ports below it report lockstep_ib_port_link_degraded 1")


@register("infiniband", help="InfiniBand/RoCE port counters, state and rate from sysfs", add_flags=add_flags)
def factory(config: ExporterConfig) -> InfinibandCollector:
    rates = parse_expected_rates(config.flag("infiniband.expected-rate", ()))
    return InfinibandCollector(Options(config.sysfs, rates))
