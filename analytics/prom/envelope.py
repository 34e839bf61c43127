"""The Prometheus HTTP API's answer envelope: ``{"status": "success", "data": {"result": [...]}}``, or
``{"status": "error", "error": "..."}``. Prometheus, Thanos, Mimir and VictoriaMetrics all answer so."""
from __future__ import annotations

from lockstep.analytics.prom.errors import MalformedAnswer, PrometheusError


def result_of(payload: object) -> list:
    """``data.result`` of a decoded answer: PrometheusError with the server's own message when it
    refused the query, MalformedAnswer when the body is not an API answer at all."""
    if not isinstance(payload, dict):
        raise MalformedAnswer(f"not a Prometheus API answer: JSON {type(payload).__name__}")
    if payload.get("status") != "success":
        raise PrometheusError(str(payload.get("error", "query failed"))[:500])
    data = payload.get("data")
    result = data.get("result") if isinstance(data, dict) else None
    if not isinstance(result, list):
        raise MalformedAnswer(f"not a Prometheus API answer: no data.result list: {str(data)[:200]}")
    return result
