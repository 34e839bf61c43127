"""The storage exporter's /metrics read back in its tests: every sample by (name, sorted labels), by
prometheus_client's own parser (``exposition.parse``)."""
from __future__ import annotations

from lockstep.exporters.catalog.model import Metric
from tests.helpers.exposition import parse


async def scrape_text(client) -> str:
    resp = await client.get("/metrics")
    assert resp.status == 200
    return await resp.text()


async def scrape(client) -> dict[tuple, float]:
    return parse(await scrape_text(client))


def value(samples: dict[tuple, float], metric: Metric, **labels) -> float | None:
    return samples.get((metric.name, tuple(sorted(labels.items()))))
