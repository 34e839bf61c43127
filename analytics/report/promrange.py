"""Range queries against the Prometheus HTTP API (``GET /api/v1/query_range``) into long pandas frames.

Prometheus refuses a range query of more than 11,000 points per series, so a month at a fine step is
fetched in chunks; the frames are concatenated and de-duplicated on the chunk edges.
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
    """One named PromQL range query; ``step_s`` is its resolution."""

    name: str
    promql: str
    step_s: float


def chunks(start: float, end: float, step_s: float, max_points: int = MAX_POINTS) -> list[tuple[float, float]]:
    """Split [start, end] into windows of at most ``max_points`` evaluation points each."""
    span = step_s * (max_points - 1)
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


def _get(base_url: str, params: dict[str, str], timeout: float) -> dict:
    url = f"{base_url.rstrip('/')}/api/v1/query_range?{urllib.parse.urlencode(params)}"
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
    for lo, hi in chunks(start, end, query.step_s):
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
