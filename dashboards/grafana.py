"""The one wrapper around grafanalib: current panel types, a templated datasource, stable ids.

grafanalib (0.7) writes pre-v8 JSON for several panels (bargauge ``fieldOptions``, the old
heatmap) and a datasource by name. Every lockstep panel is therefore a ``ModernPanel``: grafanalib's
``Panel`` base (targets, gridPos, links, thresholds) with the current ``fieldConfig``/``options``
shape, and ``render`` drops the legacy keys grafanalib still emits. Panel JSON is Grafana 10's
(schemaVersion 39).
"""
from __future__ import annotations

import json
import string
from typing import Any, Iterable, Sequence

import attr
from grafanalib import core as g
from grafanalib._gen import DashboardEncoder

from lockstep.dashboards.config import Config

PANEL_TYPES = ("timeseries", "stat", "table", "bargauge", "state-timeline", "heatmap")
SCHEMA_VERSION = 39
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}

# Keys grafanalib emits for pre-v8 Grafana that current Grafana ignores; dropped by ``render``.
_LEGACY_DASHBOARD = ("rows", "style", "sharedCrosshair", "hideControls", "gnetId", "id", "__inputs")
_LEGACY_PANEL = ("span", "height", "minSpan", "error", "editable", "repeatDirection", "maxPerRow",
                 "cacheTimeout", "hideTimeOverride", "columns", "fontSize", "color", "mappings")
_LEGACY_TARGET = ("query", "target", "metric", "step", "intervalFactor", "hide")
_LEGACY_VARIABLE = ("useTags", "tagsQuery", "tagValuesQuery", "auto", "auto_min", "auto_count")


@attr.s
class ModernPanel(g.Panel):
    """A current-format panel of one of ``PANEL_TYPES``; ``w``/``h`` are its grid size."""

    type = attr.ib(default="timeseries", validator=attr.validators.in_(PANEL_TYPES))
    unit = attr.ib(default="none", validator=attr.validators.instance_of(str))
    options = attr.ib(factory=dict)
    custom = attr.ib(factory=dict)
    defaults = attr.ib(factory=dict)
    overrides = attr.ib(factory=list)
    w = attr.ib(default=12)
    h = attr.ib(default=8)

    def to_json_data(self) -> dict[str, Any]:
        defaults = {"unit": self.unit, "custom": self.custom, **self.defaults}
        return self.panel_json({"type": self.type, "options": self.options,
                                "fieldConfig": {"defaults": defaults, "overrides": self.overrides}})


def target(expr: str, legend: str = "", *, instant: bool = False, table: bool = False) -> g.Target:
    """A Prometheus query; ``instant`` for tables and stats of "now", ``table`` for table format."""
    return g.Target(expr=expr, legendFormat=legend, instant=instant, datasource=DATASOURCE,
                    format="table" if table else "time_series")


def panel(kind: str, title: str, targets: Sequence[g.Target], unit: str, *, description: str = "",
          w: int = 12, h: int = 8, thresholds: Sequence[tuple[str, float | None]] = (("green", None),),
          **fields: Any) -> ModernPanel:
    """The single panel factory: refIds A, B, ... in order, the datasource variable everywhere,
    and Grafana's own resolution (grafanalib's fixed ``maxDataPoints`` of 100 is dropped)."""
    refs = [attr.evolve(t, refId=string.ascii_uppercase[i]) for i, t in enumerate(targets)]
    steps = [{"color": color, "value": value} for color, value in thresholds]
    return ModernPanel(type=kind, title=title, targets=refs, unit=unit, description=description or None,
                       dataSource=DATASOURCE, w=w, h=h, thresholds=steps, maxDataPoints=None, **fields)


def layout(panels: Iterable[ModernPanel]) -> list[ModernPanel]:
    """Place panels left to right in rows of 24 columns and number them 1, 2, ... in that order."""
    placed, x, y, row_h = [], 0, 0, 0
    for i, p in enumerate(panels, start=1):
        if x + p.w > 24:
            x, y, row_h = 0, y + row_h, 0
        placed.append(attr.evolve(p, id=i, gridPos=g.GridPos(h=p.h, w=p.w, x=x, y=y)))
        x, row_h = x + p.w, max(row_h, p.h)
    return placed


def datasource_variable(cfg: Config) -> g.Template:
    return g.Template(name=cfg.datasource_variable, query="prometheus", type="datasource",
                      label="Data source", default="default", refresh=1)


def query_variable(name: str, label: str, values_query: str, *, include_all: bool = False) -> g.Template:
    """A variable filled from ``label_values(...)`` through the templated datasource."""
    return g.Template(name=name, label=label, query=values_query, dataSource=DATASOURCE, refresh=2,
                      includeAll=include_all, multi=include_all, allValue=".*" if include_all else None)


def dashboard(cfg: Config, name: str, title: str, description: str, panels: Iterable[ModernPanel],
              variables: Sequence[g.Template] = ()) -> g.Dashboard:
    """A lockstep dashboard: stable uid, the datasource variable first, links to its siblings."""
    siblings = g.DashboardLink(title="lockstep", type="dashboards", tags=list(cfg.tags), asDropdown=True,
                               includeVars=True, keepTime=True)
    return g.Dashboard(title=title, uid=cfg.uid(name), description=description, tags=list(cfg.tags),
                       panels=layout(panels), links=[siblings], schemaVersion=SCHEMA_VERSION,
                       templating=g.Templating(list=[datasource_variable(cfg), *variables]),
                       time=g.Time(cfg.time_from, "now"), refresh=cfg.refresh, editable=False,
                       graphTooltip=g.GRAPH_TOOLTIP_MODE_SHARED_CROSSHAIR, timezone="utc")


def data_link(cfg: Config, title: str, name: str, **vars_from_fields: str) -> dict[str, str]:
    """A panel data link to dashboard ``name`` that carries the time range and datasource, and sets
    each ``var-<variable>`` from a field of the clicked row or series."""
    params = ["${__url_time_range}", f"${{{cfg.datasource_variable}:queryparam}}"]
    params += [f"var-{var}=${{__data.fields.{field}}}" for var, field in sorted(vars_from_fields.items())]
    return {"title": title, "url": f"/d/{cfg.uid(name)}/{name}?" + "&".join(params)}


def _clean(node: Any, drop: tuple[str, ...] = ()) -> Any:
    if isinstance(node, dict):
        return {k: _clean(v) for k, v in node.items() if k not in drop and (v is not None or k == "value")}
    if isinstance(node, list):
        return [_clean(v) for v in node]
    return node


def render(dash: g.Dashboard) -> dict[str, Any]:
    """The dashboard as current Grafana JSON (a plain dict), legacy keys and nulls removed."""
    data = json.loads(json.dumps(dash.to_json_data(), cls=DashboardEncoder))
    data = _clean(data, _LEGACY_DASHBOARD)
    data["panels"] = [_clean(p, _LEGACY_PANEL) for p in data["panels"]]
    for p in data["panels"]:
        p["targets"] = [_clean(t, _LEGACY_TARGET) for t in p["targets"]]
        for t in p["targets"]:
            t["range"] = not t["instant"]
    data["templating"]["list"] = [_variable(v) for v in data["templating"]["list"]]
    return data


def _variable(var: dict[str, Any]) -> dict[str, Any]:
    var = _clean(var, _LEGACY_VARIABLE)
    if var["type"] == "query":
        var["current"], var["definition"] = {}, var["query"]
    return var


def to_text(data: dict[str, Any]) -> str:
    """Deterministic JSON text: sorted keys, two-space indent, trailing newline."""
    return json.dumps(data, indent=2, sort_keys=True) + "\n"
