"""Dashboard lint rules in the spirit of grafana/dashboard-linter, over rendered dashboard JSON.

Each rule takes the dashboard dict and returns problem strings ("panel 3 'Title': ..."); ``lint``
runs them all. The tests run them on every generated dashboard, and on broken ones to prove each
rule fires.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Iterable

from lockstep.dashboards.grafana import DATASOURCE, PANEL_TYPES
from lockstep.dashboards.promql import grafana_variables, metric_names, variable_metric_names

Dashboard = dict[str, Any]
# Prometheus' own series a dashboard may name besides the catalog's.
BUILTIN_METRICS = frozenset({"ALERTS"})
GRAFANA_BUILTINS = frozenset({"__rate_interval", "__range", "__range_s", "__interval", "__url_time_range", "__data"})
_UID = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")
_RATE_CALL = re.compile(r"\b(rate|irate|increase|delta|idelta|deriv)\s*\(")


def _panels(d: Dashboard) -> Iterable[tuple[str, dict]]:
    for p in d.get("panels", []):
        yield f"panel {p.get('id')} {p.get('title', '')!r}", p


def _exprs(d: Dashboard) -> Iterable[tuple[str, str]]:
    for where, p in _panels(d):
        for t in p.get("targets", []):
            yield f"{where} target {t.get('refId')}", t.get("expr", "")


def check_datasource(d: Dashboard) -> list[str]:
    """Every panel, target and query variable uses the ``${datasource}`` variable."""
    problems = [f"{w}: datasource {p.get('datasource')} is not {DATASOURCE}" for w, p in _panels(d)
                if p.get("datasource") != DATASOURCE]
    problems += [f"{w} target {t.get('refId')}: datasource {t.get('datasource')} is not {DATASOURCE}"
                 for w, p in _panels(d) for t in p.get("targets", []) if t.get("datasource") != DATASOURCE]
    variables = d.get("templating", {}).get("list", [])
    if not variables or variables[0].get("type") != "datasource" or variables[0].get("query") != "prometheus":
        problems.append("templating: the first variable must be a Prometheus datasource variable")
    problems += [f"variable {v.get('name')}: datasource {v.get('datasource')} is not {DATASOURCE}"
                 for v in variables if v.get("type") == "query" and v.get("datasource") != DATASOURCE]
    return problems


def check_panels(d: Dashboard) -> list[str]:
    """Current panel types only, a unit on every panel, at least one query each."""
    problems = []
    for where, p in _panels(d):
        if p.get("type") not in PANEL_TYPES:
            problems.append(f"{where}: panel type {p.get('type')!r} is not one of {PANEL_TYPES}")
        if not p.get("fieldConfig", {}).get("defaults", {}).get("unit"):
            problems.append(f"{where}: no unit")
        if not p.get("targets"):
            problems.append(f"{where}: no queries")
    return problems


def check_rate_intervals(d: Dashboard) -> list[str]:
    """Every rate-like function's range is ``[$__rate_interval]``."""
    problems = []
    for where, expr in _exprs(d):
        for call in _RATE_CALL.finditer(expr):
            ranges = re.findall(r"\[([^\]]*)\]", _call_body(expr, call.end()))
            if not ranges or ranges[-1] != "$__rate_interval":
                problems.append(f"{where}: {call.group(1)}() range is {ranges[-1:] or 'missing'}, "
                                f"not $__rate_interval")
    return problems


def _call_body(expr: str, start: int) -> str:
    depth = 1
    for i in range(start, len(expr)):
        depth += {"(": 1, ")": -1}.get(expr[i], 0)
        if depth == 0:
            return expr[start:i]
    return expr[start:]


def check_layout(d: Dashboard) -> list[str]:
    """Unique positive panel ids; gridPos inside 24 columns, positive sizes, no overlaps."""
    problems, seen, cells = [], set(), {}
    for where, p in _panels(d):
        pid = p.get("id")
        if not isinstance(pid, int) or pid <= 0 or pid in seen:
            problems.append(f"{where}: id {pid!r} is missing, not positive or duplicated")
        seen.add(pid)
        g = p.get("gridPos") or {}
        x, y, w, h = (g.get(k) for k in "xywh")
        if not all(isinstance(v, int) for v in (x, y, w, h)) or w < 1 or h < 1 or x < 0 or y < 0 or x + w > 24:
            problems.append(f"{where}: invalid gridPos {g}")
            continue
        for cell in ((cx, cy) for cx in range(x, x + w) for cy in range(y, y + h)):
            if cell in cells:
                problems.append(f"{where}: overlaps {cells[cell]}")
                break
            cells[cell] = where
    return problems


def check_identity(d: Dashboard) -> list[str]:
    """A stable, well-formed uid; links to sibling dashboards that keep time range and variables."""
    problems = [] if _UID.match(str(d.get("uid", ""))) else [f"uid {d.get('uid')!r} is missing or malformed"]
    links = d.get("links", [])
    if not any(link.get("keepTime") and link.get("includeVars") for link in links):
        problems.append("no dashboard link that keeps the time range and the variables")
    for where, p in _panels(d):
        for link in p.get("fieldConfig", {}).get("defaults", {}).get("links", []):
            if "${__url_time_range}" not in link.get("url", ""):
                problems.append(f"{where}: data link {link.get('title')!r} drops the time range")
    return problems


def check_variables(d: Dashboard) -> list[str]:
    """Every ``$variable`` a query uses is defined by the dashboard or by Grafana."""
    defined = {v.get("name") for v in d.get("templating", {}).get("list", [])} | GRAFANA_BUILTINS
    return [f"{where}: undefined variable ${name}" for where, expr in _exprs(d)
            for name in sorted(grafana_variables(expr) - defined)]


def check_metrics(d: Dashboard, known: Iterable[str]) -> list[str]:
    """Every metric a query names is in ``known`` (the catalog, the recorded series of the alerts' rule
    file) or is Prometheus' own."""
    allowed = set(known) | BUILTIN_METRICS
    problems = [f"{where}: unknown metric {name}" for where, expr in _exprs(d)
                for name in sorted(metric_names(expr) - allowed)]
    return problems + [f"variable {v.get('name')}: unknown metric {name}"
                       for v in d.get("templating", {}).get("list", []) if v.get("type") == "query"
                       for name in sorted(variable_metric_names(v.get("query", "")) - allowed)]


RULES: tuple[Callable[[Dashboard], list[str]], ...] = (check_datasource, check_panels, check_rate_intervals,
                                                        check_layout, check_identity, check_variables)


def lint(d: Dashboard, known_metrics: Iterable[str]) -> list[str]:
    problems = [problem for rule in RULES for problem in rule(d)]
    return problems + check_metrics(d, known_metrics)
