"""The one configuration every dashboard query is a function of (the mixin convention).

Selectors name the Prometheus scrape jobs of the conventions: the same ``Selectors`` the alert and
recording rules, the analytics service and the local stack use (``lockstep.exporters.catalog.selectors``).
"""
from __future__ import annotations

from dataclasses import dataclass

from lockstep.exporters.catalog import Metric
from lockstep.exporters.catalog.selectors import DEFAULT as DEFAULT_SELECTORS
from lockstep.exporters.catalog.selectors import Selectors


@dataclass(frozen=True)
class Config:
    """Selectors, the rate window and the dashboard identity settings."""

    selectors: Selectors = DEFAULT_SELECTORS
    rate_interval: str = "$__rate_interval"
    datasource_variable: str = "datasource"
    uid_prefix: str = "lockstep-"
    tags: tuple[str, ...] = ("lockstep",)
    refresh: str = "30s"
    time_from: str = "now-3h"

    def uid(self, name: str) -> str:
        return f"{self.uid_prefix}{name}"


DEFAULT = Config()


def sel(metric: Metric | str, *matchers: str) -> str:
    """``metric{m1, m2}`` for a catalog metric or a recorded series (``lockstep.alerts.recording``); empty
    matchers are dropped."""
    inner = ", ".join(m for m in matchers if m)
    return f"{getattr(metric, 'name', metric)}{{{inner}}}"


def rate(cfg: Config, metric: Metric, *matchers: str) -> str:
    """``rate(metric{...}[$__rate_interval])``: the only way a dashboard takes a rate."""
    return f"rate({sel(metric, *matchers)}[{cfg.rate_interval}])"


def range_total(cfg: Config, rate_expr: str) -> str:
    """The total over the dashboard's time range of a per-second rate expression.

    An average of the rate over the whole range (a subquery) times the range's length, so that
    totals too are built from ``rate(...[$__rate_interval])`` and never from a bare ``increase``.
    """
    return f"avg_over_time(({rate_expr})[$__range:$__interval]) * $__range_s"
