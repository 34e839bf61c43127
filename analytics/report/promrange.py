"""Range queries against the Prometheus HTTP API (``GET /api/v1/query_range``) into long pandas frames.

Prometheus refuses a range query of more than 11,000 points per series, so a month at a fine step is
fetched in chunks; the frames are concatenated and de-duplicated on the chunk edges. VictoriaMetrics
also counts the points of a subquery (``[1h:30s]``) over the whole chunk (at most 30,000 by default),
so a query with a subquery is chunked by its inner resolution as well. Requests go through
``lockstep.analytics.report.client.PromClient`` (the shared session: authentication, TLS, extra headers).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import pandas as pd

from lockstep.analytics.prom.envelope import result_of
from lockstep.analytics.prom.errors import PrometheusError
from lockstep.exporters.toolkit.jsonload import load_json

if TYPE_CHECKING:
    from lockstep.analytics.report.client import PromClient

MAX_POINTS = 11_000  # Prometheus' own limit per series and range query


@dataclass(frozen=True, slots=True)
class RangeQuery:
    """One named PromQL range query; ``step_s`` is its resolution. A query holding a subquery names the
    subquery's range and step (``[{window_s}s:{inner_s}s]``)."""

    name: str
    promql: str
    step_s: float
    inner_s: float | None = None
    window_s: float = 0.0

    def chunk_span(self, max_points: int = MAX_POINTS) -> float:
        """Seconds of range per request: at most ``max_points`` evaluation points, and as many points of
        the subquery over the chunk and the window before it."""
        span = self.step_s * (max_points - 1)
        if self.inner_s:
            span = min(span, max(self.step_s, self.inner_s * (max_points - 1) - self.window_s))
        return span


def chunks(start: float, end: float, query: RangeQuery, max_points: int = MAX_POINTS) -> list[tuple[float, float]]:
    """Split [start, end] into windows of at most ``max_points`` evaluation points each."""
    step_s, span = query.step_s, query.chunk_span(max_points)
    span = max(step_s, span // step_s * step_s)   # chunk edges on the step grid: no point computed twice
    out, t = [], start
    while t <= end:
        out.append((t, min(end, t + span)))
        t += span + step_s
    return out


def parse_matrix(payload: object) -> pd.DataFrame:
    """The decoded JSON body of ``/api/v1/query_range`` → one row per (series, timestamp), labels as
    columns. Anything that is not a matrix answer is a PrometheusError: the report's totals would be
    wrong without the series, so a malformed one fails the report rather than vanish from it."""
    rows = []
    for i, series in enumerate(result_of(payload)):
        labels, values = _series(series, i)
        rows.extend({**labels, "timestamp": ts, "value": v} for ts, v in values)
    return pd.DataFrame(rows)


def _series(series: object, i: int) -> tuple[dict[str, str], list[tuple[float, float]]]:
    """A series' labels and its points: ``values`` of a matrix, or the one ``value`` of a vector."""
    labels = series.get("metric") if isinstance(series, dict) else None
    points = series.get("values", [series.get("value")] if "value" in series else None) \
        if isinstance(series, dict) else None
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()) \
            or not isinstance(points, list):
        raise PrometheusError(f"series {i} is not a series (metric labels and values)")
    out = []
    for point in points:
        if not isinstance(point, list) or len(point) != 2 or not isinstance(point[1], str):
            raise PrometheusError(f"series {i}: a point is not [timestamp, \"value\"]: {str(point)[:80]}")
        try:
            ts, value = float(point[0]), float(point[1])
        except (TypeError, ValueError):
            raise PrometheusError(f"series {i}: a point is not numeric: {str(point)[:80]}") from None
        if not math.isfinite(ts):
            raise PrometheusError(f"series {i}: timestamp {point[0]!r} is not finite")
        out.append((ts, value))
    return labels, out


def _get(client: PromClient, params: dict[str, str], timeout: float, path: str = "/api/v1/query_range") -> object:
    status, body = client.get(path, params, timeout)
    try:
        # Prometheus explains a bad query in a JSON body with status 400/422
        return load_json(body)
    except ValueError as exc:  # e.g. the URL of Grafana, a login page, or an authenticating proxy's refusal
        raise PrometheusError(f"{client.url}{path}: HTTP {status}: not a Prometheus API answer "
                              f"(JSON: {exc}): {body[:80]!r}") from None


def fetch(client: PromClient, query: RangeQuery, start: float, end: float, timeout: float = 60.0,
          on_chunk: Callable[[], None] = lambda: None) -> pd.DataFrame:
    """All chunks of one range query as a single long frame (empty frame when nothing matched)."""
    frames = []
    for lo, hi in chunks(start, end, query):
        params = {"query": query.promql, "start": f"{lo:.3f}", "end": f"{hi:.3f}", "step": f"{query.step_s:g}"}
        payload = _get(client, params, timeout)
        try:
            frames.append(parse_matrix(payload))
        except PrometheusError as exc:
            raise PrometheusError(f"{client.url}: query {query.name} ({query.promql}): {exc}") from None
        on_chunk()
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if frame.empty:
        return pd.DataFrame(columns=["timestamp", "value"])
    keys = [c for c in frame.columns if c != "value"]
    return frame.drop_duplicates(subset=keys).reset_index(drop=True)


def instant(client: PromClient, promql: str, at: float, timeout: float = 60.0) -> list[dict]:
    """``GET /api/v1/query`` at ``at``: the result list as answered (a vector, or a matrix of raw
    samples for a range selector), each series checked as ``parse_matrix`` checks them."""
    payload = _get(client, {"query": promql, "time": f"{at:.3f}"}, timeout, "/api/v1/query")
    try:
        result = result_of(payload)
        for i, series in enumerate(result):
            _series(series, i)
    except PrometheusError as exc:
        raise PrometheusError(f"{client.url}: query {promql}: {exc}") from None
    return result
