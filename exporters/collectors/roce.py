"""``roce``: congestion-control and transport error counters from each RDMA port's ``hw_counters/``
(``<sysfs>/class/infiniband/<device>/ports/<port>/hw_counters/<name>``; names as mlx5 prints them).
A counter the driver does not have is not emitted."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from lockstep.exporters.catalog import fabric as m
from lockstep.exporters.catalog.model import Metric
from lockstep.exporters.config import ExporterConfig
from lockstep.exporters.fabric.device_scan import DeviceScan
from lockstep.exporters.registry import register
from lockstep.exporters.toolkit.logs import once
from lockstep.exporters.toolkit.sample import Sample, new_sample

log = logging.getLogger("lockstep.collector.roce")

# hw_counters file -> metric; names as the mlx5 driver prints them (drivers/infiniband/hw/mlx5/counters.c)
HW_COUNTERS = {
    "np_ecn_marked_roce_packets": m.ROCE_ECN_MARKED, "np_cnp_sent": m.ROCE_CNP_SENT,
    "rp_cnp_handled": m.ROCE_CNP_HANDLED, "rp_cnp_ignored": m.ROCE_CNP_IGNORED,
    "out_of_sequence": m.ROCE_OUT_OF_SEQUENCE, "packet_seq_err": m.ROCE_PACKET_SEQUENCE_ERRORS,
    "local_ack_timeout_err": m.ROCE_LOCAL_ACK_TIMEOUT, "implied_nak_seq_err": m.ROCE_IMPLIED_NAK_ERRORS,
    "rx_icrc_encapsulated": m.ROCE_ICRC_ERRORS, "rnr_nak_retry_err": m.ROCE_RNR_NAK_RETRY_ERRORS,
    "out_of_buffer": m.ROCE_OUT_OF_BUFFER, "duplicate_request": m.ROCE_DUPLICATE_REQUESTS,
}


@dataclass(frozen=True)
class RoceOptions:
    sysfs: Path

    @classmethod
    def from_config(cls, config: ExporterConfig) -> "RoceOptions":
        return cls(config.sysfs)


class RoceCollector:
    def __init__(self, options: RoceOptions) -> None:
        self.scan = DeviceScan(options.sysfs)
        self._reads: list[tuple[str, Metric, tuple[str, str]]] = []  # (path, metric, labels)

    def _rebuild(self) -> None:
        self._reads = [(f"{port.path}/hw_counters/{name}", HW_COUNTERS[name], (port.device, port.port))
                       for device in self.scan.devices for port in device.ports
                       for name in port.hw_counters if name in HW_COUNTERS]

    def collect(self) -> Iterable[Sample]:
        if self.scan.refresh() is not None:
            self._rebuild()
        read, out = self.scan.files.read, []
        for path, metric, labels in self._reads:
            raw = read(path)
            if raw is None:
                continue
            try:
                out.append(new_sample((metric, labels, float(int(raw)))))
            except ValueError:
                once(log, logging.WARNING, path, "malformed counter %s: %r", path, raw[:40])
        return out

    def close(self) -> None:
        self.scan.close()


@register("roce", help="RoCE congestion (ECN, CNP) and transport error counters from sysfs hw_counters")
def factory(config: ExporterConfig) -> RoceCollector:
    return RoceCollector(RoceOptions.from_config(config))
