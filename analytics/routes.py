"""HTTP handlers of the analytics service: ``/metrics``, ``/api/v1/jobs``, ``/api/v1/jobs/{job_id}``.

JSON answers follow Prometheus' API envelope (``status``, ``data`` or ``error``/``errorType``) and
carry ``stale`` and ``updated`` so a client can tell old results from fresh ones.
"""
from __future__ import annotations

import asyncio

from aiohttp import web

from analytics import promql
from analytics.service import CONFIG, STATE, ServiceState, index_response, render_metrics
from exporters.exposition import OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE, wants_openmetrics


def _envelope(state: ServiceState, data: object) -> dict:
    h = state.health
    return {"status": "success", "stale": h.stale, "updated": state.results.updated, "up": h.up,
            "last_error": h.last_error or None, "data": data}


def _error(status: int, kind: str, message: str) -> web.Response:
    return web.json_response({"status": "error", "errorType": kind, "error": message}, status=status)


async def metrics(request: web.Request) -> web.Response:
    openmetrics = wants_openmetrics(request.headers.get("Accept", ""))
    body = await asyncio.to_thread(render_metrics, request.app[STATE], openmetrics)
    response = web.Response(body=body.encode())
    response.headers["Content-Type"] = OPENMETRICS_CONTENT_TYPE if openmetrics else TEXT_CONTENT_TYPE
    return response


async def jobs(request: web.Request) -> web.Response:
    state = request.app[STATE]
    rows = [{"job_id": job_id, "time": v["time"], "stalled": v["stall"]["stalled"], "cause": v["stall"]["cause"],
             "stragglers": v["stragglers"], "goodput_ratio": v["loss"]["goodput_ratio"]}
            for job_id, v in sorted(state.results.jobs.items())]
    return web.json_response(_envelope(state, rows))


async def job(request: web.Request) -> web.Response:
    job_id = request.match_info["job_id"]
    try:
        promql.validate_job_id(job_id)
    except promql.InvalidJobId as exc:
        return _error(400, "bad_data", str(exc))
    state = request.app[STATE]
    view = state.results.jobs.get(job_id)
    if view is None:
        shard = request.app[CONFIG].shard
        where = "" if shard.owns(job_id) else f" (belongs to another shard than {shard.index}/{shard.count})"
        return _error(404, "not_found", f"job {job_id} is not scored by this replica{where}")
    return web.json_response(_envelope(state, view))


async def index(request: web.Request) -> web.Response:
    return index_response(request.app[CONFIG])


async def healthy(request: web.Request) -> web.Response:
    return web.Response(text="Healthy.\n")


def add_routes(app: web.Application) -> None:
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/api/v1/jobs", jobs)
    app.router.add_get("/api/v1/jobs/{job_id:[^/]+}", job)   # any id reaches validation
    app.router.add_get("/-/healthy", healthy)
    app.router.add_get("/", index)
