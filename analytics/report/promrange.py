"""Range queries against the Prometheus HTTP API (``GET /api/v1/query_range``) into long pandas frames.

Prometheus refuses a range query of more than 11,000 points per series, so a month at a fine step is
fetched in chunks; the frames are concatenated and de-duplicated on the chunk edges. VictoriaMetrics
also counts the points of a subquery (``[1h:30s]``) over the whole chunk (at most 30,000 by default),
so a query with a subquery is chunked by its inner resolution as well.
"""
from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Callable

import pandas as pd

MAX_POINTS = 11_000  # Prometheus' own limit per series and range query


class PrometheusError(RuntimeError):
    pass


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


def parse_matrix(payload: dict) -> pd.DataFrame:
    """The JSON body of ``/api/v1/query_range`` → one row per (series, timestamp), labels as columns."""
    if not isinstance(payload, dict):
        raise PrometheusError(f"not a Prometheus API answer: JSON {type(payload).__name__}")
    if payload.get("status") != "success":
        raise PrometheusError(payload.get("error", "query failed"))
    result = (payload.get("data") or {}).get("result")
    if not isinstance(result, list):
        raise PrometheusError("not a Prometheus API answer: no data.result list")
    rows = []
    for series in result:
        labels = series["metric"]
        for ts, value in series["values"]:
            rows.append({**labels, "timestamp": float(ts), "value": float(value)})
    return pd.DataFrame(rows)


def _get(base_url: str, params: dict[str, str], timeout: float, path: str = "/api/v1/query_range") -> dict:
    url = f"{base_url.rstrip('/')}{path}?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            body = resp.read()
    except urllib.error.HTTPError as exc:  # Prometheus explains a bad query in the JSON body
        try:
            return json.loads(exc.read())
        except ValueError:
            raise PrometheusError(f"{url}: HTTP {exc.code}") from exc
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        raise PrometheusError(f"cannot reach Prometheus at {base_url}: {exc}") from exc
    try:
        return json.loads(body)
    except ValueError:  # e.g. the URL of Grafana or a login page: HTML with status 200
        raise PrometheusError(f"{url}: not a Prometheus API answer (not JSON): {body[:80]!r}") from None


def fetch(base_url: str, query: RangeQuery, start: float, end: float, timeout: float = 60.0,
          on_chunk: Callable[[], None] = lambda: None) -> pd.DataFrame:
    """All chunks of one range query as a single long frame (empty frame when nothing matched)."""
    frames = []
    for lo, hi in chunks(start, end, query):
        params = {"query": query.promql, "start": f"{lo:.3f}", "end": f"{hi:.3f}", "step": f"{query.step_s:g}"}
        payload = _get(base_url, params, timeout)
        try:
            frames.append(parse_matrix(payload))
        except PrometheusError as exc:
            raise PrometheusError(f"{base_url}: query {query.name} ({query.promql}): {exc}") from None
        on_chunk()
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if frame.empty:
        return pd.DataFrame(columns=["timestamp", "value"])
    keys = [c for c in frame.columns if c != "value"]
    return frame.drop_duplicates(subset=keys).reset_index(drop=True)


def instant(base_url: str, promql: str, at: float, timeout: float = 60.0) -> list[dict]:
    """``GET /api/v1/query`` at ``at``: the result list as answered (a vector, or a matrix of raw
    samples for a range selector)."""
    payload = _get(base_url, {"query": promql, "time": f"{at:.3f}"}, timeout, "/api/v1/query")
    if not isinstance(payload, dict) or payload.get("status") != "success":
        raise PrometheusError(f"{base_url}: query {promql}: {payload.get('error', 'failed') if isinstance(payload, dict) else payload}")
    result = (payload.get("data") or {}).get("result")
    if not isinstance(result, list):
        raise PrometheusError(f"{base_url}: query {promql}: not a Prometheus API answer: no data.result list")
    return result
