"""Adapter: embed any lockstep collector in a prometheus_client registry.

The agent's own core encodes samples directly (much cheaper); this keeps the collectors usable from
any program that already exposes a prometheus_client registry.
"""
from __future__ import annotations

from typing import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.core import Metric as ClientMetric

from lockstep.exporters.catalog.model import COUNTER, Metric
from lockstep.exporters.registry import Collector


class ClientPythonCollector:
    """``prometheus_client.REGISTRY.register(ClientPythonCollector(collector))``."""

    def __init__(self, collector: Collector) -> None:
        self.collector = collector

    def collect(self) -> Iterator[ClientMetric]:
        families: dict[Metric, ClientMetric] = {}
        for metric, labels, value in self.collector.collect():
            family = families.get(metric)
            if family is None:
                kind = CounterMetricFamily if metric.type == COUNTER else GaugeMetricFamily
                family = families[metric] = kind(metric.name, metric.help, labels=list(metric.labels))
            family.add_metric(list(labels), value)
        yield from families.values()

    def describe(self) -> list[ClientMetric]:
        return []  # fresh families on every scrape; nothing to pre-declare
