"""What the fabric exporter serves: the last complete sweep, the link-health history it feeds, and the
counts of sweeps and failed node queries. Sweeps replace it whole; scrapes only read it."""
from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Iterable

from lockstep.exporters.catalog import switches as m
from lockstep.exporters.catalog.enums import LINK_HEALTH_STATES
from lockstep.exporters.switches.config import FabricConfig
from lockstep.exporters.switches.linkhealth import History, judge
from lockstep.exporters.switches.sweep import DiscoveryFailed, Sweep
from lockstep.exporters.toolkit.logs import kv
from lockstep.exporters.toolkit.sample import Sample

log = logging.getLogger("lockstep.fabric")


def _label(value: object) -> str:
    return "" if value is None else str(value)


class FabricState:
    def __init__(self, config: FabricConfig) -> None:
        self.config = config
        self.sweep: Sweep | None = None
        self.history = History()
        self.sweeps: Counter[str] = Counter()
        self.failures: Counter[tuple[str, str]] = Counter()
        self.last_ok: bool | None = None
        self.infiniband: bool | None = None
        self._down: set[str] = set()

    def record(self, sweep: Sweep) -> None:
        self.sweep, self.last_ok, self.infiniband = sweep, True, True
        self.sweeps["complete"] += 1
        self.history.observe(sweep.ended, (((n.guid, port), c.values) for n in sweep.nodes.values()
                                           for port, c in n.counters.items()))
        for node in sweep.nodes.values():
            if node.up:
                if node.guid in self._down:
                    log.info("fabric node answers again", extra=kv(guid=node.guid, name=node.name))
                self._down.discard(node.guid)
                continue
            self.failures[(node.guid, node.failure or "failed")] += 1
            if node.guid not in self._down:   # once per outage, not every sweep
                log.warning("fabric node query failed; its ports keep no counters this sweep",
                            extra=kv(guid=node.guid, name=node.name, kind=node.kind, reason=node.failure, err=node.error))
            self._down.add(node.guid)

    def record_failure(self, exc: DiscoveryFailed) -> None:
        if exc.no_infiniband:
            self.sweeps["no_infiniband"] += 1
            if self.infiniband is not False:
                log.warning("no usable InfiniBand port on this host (no HCA, or RoCE only): the fabric exporter "
                            "has nothing to sweep and will keep trying quietly", extra=kv(err=str(exc)))
            self.infiniband, self.last_ok = False, False
            return
        self.sweeps["failed"] += 1
        if self.last_ok is not False:
            log.error("fabric discovery failed; serving the last complete sweep", extra=kv(err=str(exc)))
        else:
            log.debug("fabric discovery still failing", extra=kv(err=str(exc)))
        self.last_ok, self.infiniband = False, True

    def samples(self, now: float | None = None) -> Iterable[Sample]:
        now = time.time() if now is None else now
        for result in ("complete", "failed", "no_infiniband"):
            yield Sample(m.SWEEPS, (result,), float(self.sweeps[result]))
        if self.infiniband is not None:
            yield Sample(m.INFINIBAND_PRESENT, (), 1.0 if self.infiniband else 0.0)
        if self.last_ok is not None:
            yield Sample(m.SWEEP_SUCCESS, (), 1.0 if self.last_ok else 0.0)
        for (guid, reason), count in sorted(self.failures.items()):
            yield Sample(m.NODE_QUERY_FAILURES, (guid, reason), float(count))
        if self.sweep is not None:
            yield from self._sweep_samples(self.sweep, now)

    def _sweep_samples(self, sweep: Sweep, now: float) -> Iterable[Sample]:
        yield Sample(m.SWEEP_AGE, (), max(0.0, now - sweep.ended))
        yield Sample(m.SWEEP_DURATION, (), sweep.duration_s)
        yield Sample(m.SWEEP_TIMESTAMP, (), sweep.ended)
        yield Sample(m.SWEEP_PORTS, (), float(len(sweep.ports)))
        yield Sample(m.SWEEP_UNREADABLE_LINES, (), float(sweep.fabric.unreadable_lines))
        for node in sweep.nodes.values():
            yield Sample(m.NODE_UP, (node.guid, node.kind, node.name), 1.0 if node.up else 0.0)
            yield Sample(m.NODE_QUERY_DURATION, (node.guid,), node.duration_s)
        expected = self.config.expected_rate_bits_per_second
        for port in sweep.ports:
            local, remote = port.local, port.remote
            key = (local.guid, str(local.port))
            yield Sample(m.PORT_INFO, (*key, local.kind, local.name, str(local.lid), _label(port.width),
                                       _label(port.speed), *((remote.kind, remote.guid, str(remote.port), remote.name)
                                                             if remote else ("", "", "", ""))), 1.0)
            rate = port.rate_bits_per_second
            if rate is not None:
                yield Sample(m.PORT_RATE, key, rate / 8)
            if expected is not None:
                yield Sample(m.PORT_EXPECTED_RATE, key, expected / 8)
            node = sweep.nodes.get(local.guid)
            counters = node.counters.get(local.port) if node else None
            if counters is None:
                continue   # no partner, or its node did not answer: no counters and no verdict
            for name, value in counters.values.items():
                if name in m.COUNTERS:
                    yield Sample(m.COUNTERS[name], key, float(value))
            verdict = judge(self.history, (local.guid, local.port), rate, expected,
                            (remote.guid, remote.port) if remote else None)
            for state in LINK_HEALTH_STATES:
                yield Sample(m.LINK_HEALTH, (*key, state), 1.0 if state == verdict.state else 0.0)
            for reason in verdict.reasons:
                yield Sample(m.LINK_HEALTH_REASON, (*key, reason), 1.0)
