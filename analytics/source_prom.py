"""Prometheus HTTP API (``/api/v1/query``, ``/api/v1/query_range``) → the long series frame.

Works unchanged against Thanos or Mimir (the base URL may carry a path prefix). Counters are fetched
raw and turned into rates by ``analytics.frame`` exactly as for the simulator's frame, so both paths
share every line of scoring code (the parity test holds them to it).
"""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

import aiohttp
import numpy as np
import pandas as pd

from analytics import promql
from analytics.frame import INPUT_METRICS
from exporters.catalog import CATALOG, analytics, gpu


_DECODE_INLINE_BYTES = 256 * 1024   # below this, a thread hop costs more than the decoding


class PrometheusError(RuntimeError):
    """Prometheus unreachable, slow, or answering with an error."""


@dataclass(frozen=True)
class Window:
    start: float
    end: float
    step: float


async def api_get(session: aiohttp.ClientSession, base_url: str, path: str, params: dict, timeout: float) -> list:
    """GET ``base_url + path``; returns ``data.result`` or raises PrometheusError with the cause."""
    url = base_url.rstrip("/") + path
    try:
        async with session.get(url, params=params, timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
            body = await resp.read()
        # A large job's query_range answer is tens of MB of JSON: decoded off the event loop, which keeps
        # serving /metrics meanwhile.
        payload = json.loads(body) if len(body) < _DECODE_INLINE_BYTES else await asyncio.to_thread(json.loads, body)
        if not isinstance(payload, dict):
            raise ValueError(f"expected a JSON object, got {type(payload).__name__}")
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
        raise PrometheusError(f"{url}: {type(exc).__name__}: {exc}") from None
    if resp.status != 200 or payload.get("status") != "success":
        raise PrometheusError(f"{url}: HTTP {resp.status}: {payload.get('error', '')}")
    return payload["data"]["result"]


async def list_jobs(session: aiohttp.ClientSession, base_url: str, at: float, timeout: float) -> list[str]:
    """Every ``job_id`` on ``lockstep_gpu_job_info`` at ``at``, as Prometheus reports it (unvalidated)."""
    result = await api_get(session, base_url, "/api/v1/query", {"query": promql.JOBS_QUERY, "time": f"{at:.3f}"},
                           timeout)
    return sorted({r["metric"].get("job_id", "") for r in result} - {""})


async def fetch_job(session: aiohttp.ClientSession, base_url: str, job_id: str, window: Window,
                    timeout: float, concurrency: int = 4) -> pd.DataFrame:
    """The long frame of one job over ``window`` (one query_range per input metric)."""
    gate = asyncio.Semaphore(concurrency)
    params = {"start": f"{window.start:.3f}", "end": f"{window.end:.3f}", "step": f"{window.step:g}"}

    async def one(metric: str) -> list:
        if metric in (gpu.JOB_INFO.name, analytics.RANK_STEP_SECONDS.name):   # carry job_id themselves
            query = promql.with_job(metric, job_id)
        else:
            query = promql.metric_for_job(metric, job_id)
        async with gate:
            return await api_get(session, base_url, "/api/v1/query_range", {**params, "query": query}, timeout)

    results = await asyncio.gather(*(one(m) for m in INPUT_METRICS))
    # seconds of CPU for a large job: off the event loop, which keeps serving /metrics meanwhile
    return await asyncio.to_thread(matrix_to_frame, [r for result in results for r in result])


def matrix_to_frame(result: list[dict]) -> pd.DataFrame:
    """``query_range`` matrix results → the FORMATS.md long frame (label columns as strings)."""
    parts = []
    for series in result:
        labels = series["metric"]
        name = labels.get("__name__", "")
        metric = CATALOG.get(name)
        if metric is None or not series.get("values"):
            continue
        values = np.asarray(series["values"], dtype=object)
        part = {"timestamp": values[:, 0].astype(float), "value": values[:, 1].astype(float),
                "metric": name, "node": labels.get("node", "")}
        part.update({label: labels.get(label, "") for label in metric.labels})
        parts.append(pd.DataFrame(part))
    if not parts:
        return pd.DataFrame(columns=["timestamp", "metric", "node", "value"])
    frame = pd.concat(parts, ignore_index=True)
    labels = [c for c in frame.columns if c not in ("timestamp", "value")]
    frame[labels] = frame[labels].fillna("")
    return frame.astype({c: "category" for c in labels})
