"""Run every panel query of the generated dashboards against a real Prometheus, the way Grafana
would: variables substituted, instant targets as instant queries, the rest as range queries
through ``/api/v1/query_range``. Used by the tests (and handy against a live cluster)."""
from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping
from urllib.parse import urlencode

from lockstep.dashboards.promql import metric_names, substitute

_ZERO_FALLBACK = re.compile(r"\s+or\s+vector\(0\)$")


@dataclass(frozen=True)
class PanelQuery:
    dashboard: str
    panel: str
    ref: str
    expr: str
    instant: bool

    def __str__(self) -> str:
        return f"{self.dashboard} / {self.panel} / {self.ref}"


def panel_queries(dashboards: Mapping[str, dict], values: Mapping[str, str]) -> Iterator[PanelQuery]:
    """Every target of every panel with Grafana's variables replaced by ``values``."""
    for name, d in dashboards.items():
        for p in d["panels"]:
            for t in p["targets"]:
                yield PanelQuery(name, p["title"], t["refId"], substitute(t["expr"], values), t["instant"])


def without_zero_fallback(expr: str) -> str:
    """``count(x) or vector(0)`` -> ``count(x)``: the series a stat counts must exist by themselves."""
    return _ZERO_FALLBACK.sub("", expr)


def run(url: str, q: PanelQuery, start: float, end: float, step: float, expr: str | None = None) -> list[Any]:
    """The query's result (instant at ``end`` or range over start..end); raises RuntimeError with
    Prometheus' own error message when the query fails."""
    expr = q.expr if expr is None else expr
    if q.instant:
        path, params = "query", {"query": expr, "time": str(end)}
    else:
        path, params = "query_range", {"query": expr, "start": str(start), "end": str(end), "step": str(step)}
    return _api(url, path, params, f"{q}", expr)["result"]


def _api(url: str, path: str, params: Mapping[str, str], what: str, expr: str = "") -> Any:
    try:
        with urllib.request.urlopen(f"{url}/api/v1/{path}?{urlencode(params)}", timeout=30) as resp:
            body = resp.read()
    except urllib.error.HTTPError as exc:  # 400/422 carry Prometheus' error in the JSON body
        body = exc.read()
    payload = json.loads(body)
    if payload.get("status") != "success":
        raise RuntimeError(f"{what}: {payload.get('error', body[:300])}\n  query: {expr}")
    return payload["data"]


def present_metrics(url: str, at: float, since: float | None = None) -> set[str]:
    """Metric names Prometheus holds series for within the lookback window before ``at`` or, given
    ``since``, at any time from ``since`` to ``at``."""
    if since is not None:
        return set(_api(url, "label/__name__/values", {"start": str(since), "end": str(at)}, "metric names"))
    q = PanelQuery("-", "-", "-", 'count by (__name__) ({__name__=~".+"})', instant=True)
    return {r["metric"]["__name__"] for r in run(url, q, at, at, 1)}


def data_check(url: str, queries: Iterable[PanelQuery], start: float, end: float, step: float,
               present: set[str]) -> tuple[list[str], set[str]]:
    """Run every query (any error raises), and return (queries with no data, metrics absent).

    A query is held to return data only when every metric it names is ``present``; its ``or
    vector(0)`` fallback is removed first. An instant query counts if it has data at the end or
    at any minute of the window (tables show "now"; the fault may be over by the end).
    """
    empty, absent = [], set()
    for q in queries:
        run(url, q, start, end, step)
        missing = metric_names(q.expr) - present
        if missing:
            absent |= missing
            continue
        times = [end] + ([start + 60 * i for i in range(1, int((end - start) // 60))] if q.instant else [])
        expr = without_zero_fallback(q.expr)
        if not any(run(url, q, start, t, step, expr=expr) for t in times):
            empty.append(str(q))
    return empty, absent
