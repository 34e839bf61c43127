"""The metric catalog: the single source of truth for every metric lockstep emits.

Collectors yield samples of these ``Metric`` objects; dashboards, alert rules and analytics import
names from here instead of retyping them. One module per area keeps each part's metrics together;
``enums`` holds the values of their enum labels (clock-event reasons, port states, stall causes, alert
severities) and ``selectors`` the scrape-job selectors every query is a function of.
"""
from __future__ import annotations

from lockstep.exporters.catalog import (
    analytics,
    fabric,
    gnmi,
    gpu,
    health,
    nccl,
    nccl_inspector,
    pace,
    power,
    storage,
    switches,
    validation,
)
from lockstep.exporters.catalog.model import COUNTER, GAUGE, Metric

SECTIONS = (health, gpu, fabric, storage, power, analytics, validation, nccl, nccl_inspector, pace, switches,
            gnmi)


def _build() -> dict[str, Metric]:
    catalog: dict[str, Metric] = {}
    for section in SECTIONS:
        for metric in section.METRICS:
            if metric.name in catalog:
                raise ValueError(f"metric {metric.name} defined twice (in {section.__name__})")
            catalog[metric.name] = metric
    return catalog


CATALOG: dict[str, Metric] = _build()


def get(name: str) -> Metric:
    """Look a metric up by name; a KeyError names the unknown metric."""
    try:
        return CATALOG[name]
    except KeyError:
        raise KeyError(f"metric {name!r} is not in exporters.catalog") from None


__all__ = ["CATALOG", "COUNTER", "GAUGE", "Metric", "get"]
