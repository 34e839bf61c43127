"""Prometheus text (0.0.4) and OpenMetrics (1.0.0) exposition of catalog samples.

The core owns exposition because prometheus_client's generate_latest costs ~18 µs per sample; caching
each series' ``name{labels} `` prefix brings that under 1 µs (see ARCHITECTURE.md, performance). Our
sample lines are identical in both formats (no timestamps, no exemplars, counters already end in
``_total``); only the family metadata and the trailing ``# EOF`` differ.
"""
from __future__ import annotations

import math
from typing import Iterable

from exporters.catalog.model import COUNTER, Metric
from exporters.sample import Sample

TEXT_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS_CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"
_MAX_CACHED_SERIES = 200_000

Families = dict[Metric, list[str]]


def escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    if value != value:
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 1e15:
        return "%d" % value
    return repr(float(value))


class Encoder:
    """Turns samples into exposition lines, caching the ``name{labels} `` prefix of each series."""

    def __init__(self) -> None:
        self._prefixes: dict[tuple[str, tuple[str, ...]], str] = {}

    def _prefix(self, metric: Metric, labels: tuple[str, ...]) -> str:
        if len(labels) != len(metric.labels):
            raise ValueError(f"{metric.name}: got {len(labels)} label values for labels {metric.labels}")
        if len(self._prefixes) > _MAX_CACHED_SERIES:
            self._prefixes.clear()  # label churn (job ids come and go) must not grow memory forever
        if not labels:
            prefix = metric.name + " "
        else:
            pairs = ",".join(f'{k}="{escape_label_value(str(v))}"' for k, v in zip(metric.labels, labels))
            prefix = f"{metric.name}{{{pairs}}} "
        self._prefixes[(metric.name, labels)] = prefix
        return prefix

    def add(self, families: Families, samples: Iterable[Sample]) -> None:
        """Append the lines of ``samples`` to ``families``; raises on a malformed sample."""
        prefixes = self._prefixes
        for metric, labels, value in samples:
            prefix = prefixes.get((metric.name, labels)) or self._prefix(metric, labels)
            line = prefix + format_value(value)
            lines = families.get(metric)
            if lines is None:
                families[metric] = [line]
            else:
                lines.append(line)


def render_text(families: Families) -> str:
    out: list[str] = []
    for metric, lines in families.items():
        out.append(f"# HELP {metric.name} {_escape_help(metric.help)}\n# TYPE {metric.name} {metric.type}\n")
        out.append("\n".join(lines))
        out.append("\n")
    return "".join(out)


def render_openmetrics(families: Families) -> str:
    out: list[str] = []
    for metric, lines in families.items():
        family, kind = metric.name, metric.type
        if kind == COUNTER:
            if family.endswith("_total"):
                family = family[: -len("_total")]
            else:  # a foreign counter without _total (DCGM_FI_*) is not an OpenMetrics counter
                kind = "unknown"
        out.append(f"# TYPE {family} {kind}\n")
        if metric.unit and family.endswith("_" + metric.unit):
            out.append(f"# UNIT {family} {metric.unit}\n")
        out.append(f"# HELP {family} {_escape_help(metric.help)}\n")
        out.append("\n".join(lines))
        out.append("\n")
    out.append("# EOF\n")
    return "".join(out)


def wants_openmetrics(accept: str) -> bool:
    """Content negotiation as Prometheus does it: OpenMetrics only when the client asks for it."""
    return "application/openmetrics-text" in (accept or "")
