"""The one configuration every dashboard query is a function of (the mixin convention).

Selectors name the Prometheus scrape jobs of the conventions; a site that scrapes under other job
names, or adds a cluster matcher, changes them here and nowhere else.
"""
from __future__ import annotations

from dataclasses import dataclass

from exporters.catalog import Metric


@dataclass(frozen=True)
class Config:
    """Selectors, the rate window and the dashboard identity settings."""

    node_selector: str = 'job="lockstep-node"'          # node agents (:9840), each target labelled `node`
    power_selector: str = 'job="lockstep-power"'        # power exporter (:9841)
    analytics_selector: str = 'job="lockstep-analytics"'  # analytics service (:9842)
    training_selector: str = ""                          # step times the training job exports itself
    rate_interval: str = "$__rate_interval"
    datasource_variable: str = "datasource"
    uid_prefix: str = "lockstep-"
    tags: tuple[str, ...] = ("lockstep",)
    refresh: str = "30s"
    time_from: str = "now-3h"

    def uid(self, name: str) -> str:
        return f"{self.uid_prefix}{name}"


DEFAULT = Config()


def sel(metric: Metric, *matchers: str) -> str:
    """``metric{m1, m2}`` for a catalog metric; empty matchers are dropped."""
    inner = ", ".join(m for m in matchers if m)
    return f"{metric.name}{{{inner}}}"


def rate(cfg: Config, metric: Metric, *matchers: str) -> str:
    """``rate(metric{...}[$__rate_interval])``: the only way a dashboard takes a rate."""
    return f"rate({sel(metric, *matchers)}[{cfg.rate_interval}])"


def range_total(cfg: Config, rate_expr: str) -> str:
    """The total over the dashboard's time range of a per-second rate expression.

    An average of the rate over the whole range (a subquery) times the range's length, so that
    totals too are built from ``rate(...[$__rate_interval])`` and never from a bare ``increase``.
    """
    return f"avg_over_time(({rate_expr})[$__range:$__interval]) * $__range_s"
