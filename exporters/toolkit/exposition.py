"""Prometheus text (0.0.4) and OpenMetrics (1.0.0) exposition of catalog samples.

The core owns exposition because prometheus_client's generate_latest costs over twenty times more per
sample than encoding with each series' ``name{labels} `` prefix cached (the figures: docs/architecture.md,
performance notes; ``bench/bench_exporter.py`` measures it). Our
sample lines are identical in both formats (no timestamps, no exemplars, counters already end in
``_total``); only the family metadata and the trailing ``# EOF`` differ.
"""
from __future__ import annotations

import functools
import math
from typing import Callable, Iterable

from lockstep.exporters.catalog.model import COUNTER, Metric
from lockstep.exporters.toolkit.sample import Sample

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
    """Turns samples into exposition lines. Each series keeps its ``name{labels} `` prefix and its last
    value and line: most series of a node (info, state, rate, error counters at 0) repeat their value
    from scrape to scrape, and equal values always format to the same text."""

    def __init__(self) -> None:
        # (name, labels) -> (prefix, last value, last line), replaced as one tuple so that an encoder
        # shared between threads never pairs one value with another's line.
        self._series: dict[tuple[str, tuple[str, ...]], tuple[str, float | None, str]] = {}

    def _new_series(self, metric: Metric, labels: tuple[str, ...]) -> tuple[str, float | None, str]:
        if len(labels) != len(metric.labels):
            raise ValueError(f"{metric.name}: got {len(labels)} label values for labels {metric.labels}")
        if len(self._series) > _MAX_CACHED_SERIES:
            self._series.clear()  # label churn (job ids come and go) must not grow memory forever
        if not labels:
            prefix = metric.name + " "
        else:
            pairs = ",".join(f'{k}="{escape_label_value(str(v))}"' for k, v in zip(metric.labels, labels))
            prefix = f"{metric.name}{{{pairs}}} "
        entry = self._series[(metric.name, labels)] = (prefix, None, "")
        return entry

    def add(self, families: Families, samples: Iterable[Sample]) -> None:
        """Append the lines of ``samples`` to ``families``; raises on a malformed sample (then nothing
        is added). Lines are grouped by name first: a ``str`` key hashes in C, a ``Metric`` in Python."""
        series = self._series
        by_name: dict[str, list[str]] = {}
        metrics: dict[str, Metric] = {}
        for metric, labels, value in samples:
            name = metric.name
            key = (name, labels)
            entry = series.get(key) or self._new_series(metric, labels)
            if value == entry[1]:  # NaN never equals itself, so it is always formatted
                line = entry[2]
            else:
                # Inline fast path of format_value for integral values; NaN and ±Inf fail it.
                if -1e15 < value < 1e15 and value == (integral := int(value)):
                    line = entry[0] + str(integral)
                else:
                    line = entry[0] + format_value(value)
                series[key] = (entry[0], value, line)
            lines = by_name.get(name)
            if lines is None:
                by_name[name] = [line]
                metrics[name] = metric
            else:
                lines.append(line)
        for name, lines in by_name.items():
            metric = metrics[name]
            known = families.get(metric)
            if known is None:
                families[metric] = lines
            else:
                known.extend(lines)


@functools.cache
def _text_header(metric: Metric) -> str:
    return f"# HELP {metric.name} {_escape_help(metric.help)}\n# TYPE {metric.name} {metric.type}\n"


@functools.cache
def _openmetrics_header(metric: Metric) -> str:
    family, kind = metric.name, metric.type
    if kind == COUNTER:
        if family.endswith("_total"):
            family = family[: -len("_total")]
        else:  # a foreign counter without _total (DCGM_FI_*) is not an OpenMetrics counter
            kind = "unknown"
    unit = f"# UNIT {family} {metric.unit}\n" if metric.unit and family.endswith("_" + metric.unit) else ""
    return f"# TYPE {family} {kind}\n{unit}# HELP {family} {_escape_help(metric.help)}\n"


# Headers are cached per metric (a fixed set: the catalog plus plugins' metrics): a scrape renders ~90
# families, and building their headers was a third of the render time.
def render_text(families: Families) -> str:
    return _render(families, _text_header, "")


def render_openmetrics(families: Families) -> str:
    return _render(families, _openmetrics_header, "# EOF\n")


def render_families(families: Families, openmetrics: bool) -> str:
    """``families`` as OpenMetrics or as Prometheus text (see ``wants_openmetrics``)."""
    return render_openmetrics(families) if openmetrics else render_text(families)


def _render(families: Families, header: Callable[[Metric], str], trailer: str) -> str:
    out: list[str] = []
    for metric, lines in families.items():
        out.append(header(metric))
        out.append("\n".join(lines))
        out.append("\n")
    out.append(trailer)
    return "".join(out)


def wants_openmetrics(accept: str) -> bool:
    """Content negotiation as Prometheus does it: OpenMetrics only when the client asks for it."""
    return "application/openmetrics-text" in (accept or "")
