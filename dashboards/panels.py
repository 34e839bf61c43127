"""Panel factories, one per panel type, written once and shared by every dashboard.

Each takes a title, its queries and a unit (every panel has one: Grafana's unit ids, e.g.
``percentunit``, ``Bps``, ``watt``, ``celsius``, ``hertz``, ``s``, ``short``) and returns a
``ModernPanel`` in the current JSON format.
"""
from __future__ import annotations

from typing import Any, Sequence

from grafanalib.core import Target

from lockstep.dashboards.grafana import ModernPanel, panel

Thresholds = Sequence[tuple[str, float | None]]
OK_BAD: Thresholds = (("green", None), ("red", 1))


def timeseries(title: str, targets: Sequence[Target], unit: str, *, stack: bool = False,
               min: float | None = None, max: float | None = None, bars: bool = False, **kw: Any) -> ModernPanel:
    custom = {"drawStyle": "bars" if bars else "line", "fillOpacity": 30 if stack or bars else 10,
              "lineWidth": 1, "showPoints": "never", "spanNulls": False,
              "stacking": {"group": "A", "mode": "normal" if stack else "none"}}
    options = {"legend": {"calcs": [], "displayMode": "list", "placement": "bottom", "showLegend": True},
               "tooltip": {"mode": "multi", "sort": "desc"}}
    return panel("timeseries", title, targets, unit, custom=custom, options=options,
                 defaults=_bounds(min, max), **kw)


def stat(title: str, targets: Sequence[Target], unit: str, *, thresholds: Thresholds = (("green", None),),
         calc: str = "lastNotNull", **kw: Any) -> ModernPanel:
    options = {"colorMode": "value", "graphMode": "area", "justifyMode": "auto", "orientation": "auto",
               "reduceOptions": {"calcs": [calc], "fields": "", "values": False}, "textMode": "auto"}
    return panel("stat", title, targets, unit, thresholds=thresholds, options=options,
                 defaults={"color": {"mode": "thresholds"}}, w=kw.pop("w", 4), h=kw.pop("h", 4), **kw)


def table(title: str, targets: Sequence[Target], unit: str, *, columns: dict[str, str] | None = None,
          sort_by: str | None = None, sort_desc: bool = True, links: Sequence[dict[str, str]] = (),
          hide: Sequence[str] = (), **kw: Any) -> ModernPanel:
    """Instant table queries merged into one table; ``columns`` renames (and orders) fields, ``hide``
    drops fields (the value of a query whose label is the column, as a cause is)."""
    columns = columns or {}
    organize = {"excludeByName": {"Time": True, "__name__": True, "job": True, "instance": True,
                                  **dict.fromkeys(hide, True)},
                "indexByName": {name: i for i, name in enumerate(columns)}, "renameByName": columns}
    transformations = [{"id": "merge", "options": {}}, {"id": "organize", "options": organize}]
    options = {"cellHeight": "sm", "showHeader": True,
               "sortBy": [{"desc": sort_desc, "displayName": sort_by}] if sort_by else []}
    return panel("table", title, targets, unit, options=options, transformations=transformations,
                 custom={"align": "auto", "cellOptions": {"type": "auto"}, "filterable": True},
                 defaults={"links": list(links)} if links else {}, **kw)


def bargauge(title: str, targets: Sequence[Target], unit: str, *, min: float | None = 0,
             max: float | None = None, thresholds: Thresholds = (("green", None),), **kw: Any) -> ModernPanel:
    options = {"displayMode": "gradient", "orientation": "horizontal", "showUnfilled": True,
               "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}, "minVizHeight": 10}
    return panel("bargauge", title, targets, unit, thresholds=thresholds, options=options,
                 defaults={**_bounds(min, max), "color": {"mode": "thresholds"}}, **kw)


def state_timeline(title: str, targets: Sequence[Target], unit: str, *, states: dict[str, tuple[str, str]],
                   **kw: Any) -> ModernPanel:
    """``states`` maps a value ("0", "1", ...) to (text, colour)."""
    mapping = {"type": "value", "options": {value: {"text": text, "color": color, "index": i}
                                            for i, (value, (text, color)) in enumerate(sorted(states.items()))}}
    options = {"alignValue": "left", "mergeValues": True, "rowHeight": 0.9, "showValue": "never",
               "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
               "tooltip": {"mode": "single", "sort": "none"}}
    return panel("state-timeline", title, targets, unit, options=options,
                 custom={"fillOpacity": 80, "lineWidth": 0},
                 defaults={"color": {"mode": "thresholds"}, "mappings": [mapping]}, **kw)


def heatmap(title: str, targets: Sequence[Target], unit: str, *, min: float | None = 0,
            max: float | None = 1, scheme: str = "RdYlGn", **kw: Any) -> ModernPanel:
    """A heatmap of series (one row per series, e.g. per GPU) in Grafana's current heatmap: no
    bucket calculation, the colour is the value."""
    options = {"calculate": False, "cellGap": 1, "cellValues": {"unit": unit},
               "color": {"mode": "scheme", "scheme": scheme, "scale": "linear", "fill": "dark-orange",
                         "exponent": 0.5, "steps": 64, "reverse": False, "min": min, "max": max},
               "exemplars": {"color": "rgba(255,0,255,0.7)"}, "filterValues": {"le": 1e-9},
               "legend": {"show": True}, "rowsFrame": {"layout": "auto"},
               "tooltip": {"mode": "single", "show": True, "yHistogram": False},
               "yAxis": {"axisPlacement": "left", "reverse": False, "unit": "short"}}
    return panel("heatmap", title, targets, unit, options=options,
                 custom={"hideFrom": {"legend": False, "tooltip": False, "viz": False},
                         "scaleDistribution": {"type": "linear"}}, **kw)


def _bounds(min: float | None, max: float | None) -> dict[str, float]:
    return {k: v for k, v in (("min", min), ("max", max)) if v is not None}
