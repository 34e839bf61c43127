"""The storage exporter's /metrics read back in its tests: every sample by (name, sorted labels), by
prometheus_client's own parser."""
from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from lockstep.exporters.catalog.model import Metric


async def scrape_text(client) -> str:
    resp = await client.get("/metrics")
    assert resp.status == 200
    return await resp.text()


def samples_of(text: str) -> dict[tuple, float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


async def scrape(client) -> dict[tuple, float]:
    return samples_of(await scrape_text(client))


def value(samples: dict[tuple, float], metric: Metric, **labels) -> float | None:
    return samples.get((metric.name, tuple(sorted(labels.items()))))
