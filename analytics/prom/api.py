"""Prometheus HTTP API (``/api/v1/query``, ``/api/v1/query_range``) → job ids and decoded answers.

Works unchanged against Thanos, Mimir or VictoriaMetrics (the base URL may carry a path prefix).
Range answers are decoded straight into arrays (``lockstep.analytics.prom.decode``), off the event loop when
they are large; instant answers (job lists, resumed counters) are small and read as JSON. No answer is read
past ``max_bytes`` (``lockstep.analytics.prom.answersize``): the error names the query.
"""
from __future__ import annotations

import asyncio

import aiohttp

from lockstep.analytics.prom import promql
from lockstep.analytics.prom.answersize import SERVE_DEFAULT, read_answer
from lockstep.analytics.prom.decode import Block, decode_matrix
from lockstep.analytics.prom.envelope import result_of
from lockstep.analytics.prom.errors import AnswerTooLarge, MalformedAnswer, PrometheusError, QueryTimeout
from lockstep.analytics.prom.grid import Window
from lockstep.exporters.toolkit.jsonload import load_json

__all__ = ["PrometheusError", "MalformedAnswer", "QueryTimeout", "Window", "api_get", "list_jobs", "query_range"]

_DECODE_INLINE_BYTES = 256 * 1024   # below this, a thread hop costs more than the decoding


async def _get(session: aiohttp.ClientSession, url: str, params: dict, timeout: float,
               post: bool = False, max_bytes: int = SERVE_DEFAULT) -> tuple[int, bytes]:
    """GET with ``params``, or POST them as a form (a query naming a large job's nodes is longer than
    the 8 KiB request line proxies accept); at most ``max_bytes`` of the answer."""
    request = session.post(url, data=params, timeout=aiohttp.ClientTimeout(total=timeout)) if post else \
        session.get(url, params=params, timeout=aiohttp.ClientTimeout(total=timeout))
    try:
        async with request as resp:
            return resp.status, await read_answer(resp, max_bytes)
    except AnswerTooLarge as exc:
        query = params.get("query", "")
        shown = query if len(query) <= 300 else query[:300] + "..."
        raise AnswerTooLarge(f"{url}: query {shown!r}: {exc}") from None
    except asyncio.TimeoutError as exc:
        raise QueryTimeout(f"{url}: {type(exc).__name__}: {exc}") from None
    except (aiohttp.ClientError, ValueError) as exc:
        raise PrometheusError(f"{url}: {type(exc).__name__}: {exc}") from None


def _refused(url: str, status: int, body: bytes) -> PrometheusError:
    """An answer other than 200: Prometheus' own error message when the body carries one; the store's
    own query timeout (Prometheus: 503 with errorType "timeout") is a ``QueryTimeout``."""
    try:
        doc = load_json(body)
        message, kind = doc.get("error", ""), doc.get("errorType", "")
    except (ValueError, AttributeError):
        message, kind = body[:200].decode(errors="replace"), ""
    timed_out = status == 503 and (kind == "timeout" or "timeout" in str(message) or "timed out" in str(message))
    return (QueryTimeout if timed_out else PrometheusError)(f"{url}: HTTP {status}: {message}")


async def api_get(session: aiohttp.ClientSession, base_url: str, path: str, params: dict, timeout: float,
                  max_bytes: int = SERVE_DEFAULT) -> list:
    """GET ``base_url + path`` (a small answer); returns ``data.result`` or raises PrometheusError with the cause."""
    url = base_url.rstrip("/") + path
    status, body = await _get(session, url, params, timeout, max_bytes=max_bytes)
    try:
        payload = load_json(body) if len(body) < _DECODE_INLINE_BYTES else await asyncio.to_thread(load_json, body)
    except ValueError as exc:
        raise PrometheusError(f"{url}: HTTP {status}: {type(exc).__name__}: {exc}") from None
    if status != 200:
        error = payload.get("error", "") if isinstance(payload, dict) else ""
        raise PrometheusError(f"{url}: HTTP {status}: {error}")
    try:
        return result_of(payload)
    except PrometheusError as exc:
        raise type(exc)(f"{url}: {exc}") from None


async def query_range(session: aiohttp.ClientSession, base_url: str, query: str, window: Window,
                      timeout: float, max_bytes: int = SERVE_DEFAULT) -> Block:
    """The matrix answer of ``query`` on ``window``'s grid, decoded (MalformedAnswer when it is not one)."""
    url = base_url.rstrip("/") + "/api/v1/query_range"
    params = {"query": query, "start": f"{window.start:.3f}", "end": f"{window.end:.3f}", "step": f"{window.step:g}"}
    status, body = await _get(session, url, params, timeout, post=True, max_bytes=max_bytes)
    if status != 200:
        raise _refused(url, status, body)
    try:
        # a large job's answer is tens of MB: decoded off the event loop, which keeps serving /metrics
        return decode_matrix(body, window) if len(body) < _DECODE_INLINE_BYTES else \
            await asyncio.to_thread(decode_matrix, body, window)
    except MalformedAnswer as exc:
        raise MalformedAnswer(f"{url}: {exc}") from None


async def list_jobs(session: aiohttp.ClientSession, base_url: str, at: float, timeout: float,
                    lookback_s: float = 0.0, max_bytes: int = SERVE_DEFAULT) -> list[str]:
    """Every ``job_id`` on ``lockstep_gpu_job_info`` at ``at`` (or at any time in the ``lookback_s``
    before it), as Prometheus reports it (unvalidated)."""
    query = promql.jobs_within(lookback_s) if lookback_s > 0 else promql.JOBS_QUERY
    result = await api_get(session, base_url, "/api/v1/query", {"query": query, "time": f"{at:.3f}"}, timeout,
                           max_bytes)
    return sorted({r["metric"].get("job_id", "") for r in result} - {""})
