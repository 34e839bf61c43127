"""HTTP handlers of the analytics service: ``/metrics``, ``/api/v1/jobs``, ``/api/v1/jobs/{job_id}``.

JSON answers follow Prometheus' API envelope (``status``, ``data`` or ``error``/``errorType``) and
carry ``stale`` and ``updated`` so a client can tell old results from fresh ones.
"""
from __future__ import annotations

import asyncio
import functools

from aiohttp import web

from lockstep.analytics.prom import promql
from lockstep.analytics.prom.auth import redact_url
from lockstep.analytics.service.keys import CONFIG, CREDENTIALS, ENCODER, STATE
from lockstep.analytics.service.metrics import render_metrics
from lockstep.analytics.service.views import JobSummary
from lockstep.exporters.toolkit.httpmetrics import metrics_response
from lockstep.exporters.toolkit.version import VERSION
from lockstep.exporters.toolkit.web import landing_page


def _envelope(request: web.Request, data: object) -> dict:
    state, redact = request.app[STATE], request.app[CREDENTIALS].redact
    h = state.health
    return {"status": "success", "stale": h.stale, "updated": state.results.updated, "up": h.up,
            "last_error": redact(h.last_error) or None, "data": data}


def _error(status: int, kind: str, message: str) -> web.Response:
    return web.json_response({"status": "error", "errorType": kind, "error": message}, status=status)


async def metrics(request: web.Request) -> web.Response:
    return await metrics_response(request, functools.partial(render_metrics, request.app[STATE], request.app[ENCODER]))


async def jobs(request: web.Request) -> web.Response:
    state = request.app[STATE]
    views = state.results.jobs
    return web.json_response(_envelope(request, [JobSummary.of(views[j]).to_json() for j in sorted(views)]))


async def job(request: web.Request) -> web.Response:
    job_id = request.match_info["job_id"]
    try:
        promql.validate_job_id(job_id)
    except promql.InvalidJobId as exc:
        return _error(400, "bad_data", str(exc))
    state = request.app[STATE]
    view = state.results.jobs.get(job_id)
    coverage = state.results.coverage.get(job_id)
    if view is None and coverage is not None:
        return web.json_response({"status": "error", "errorType": "not_found", "coverage": coverage,
                                  "error": f"job {job_id}: its window is being fetched ({coverage:.0%} of it so far); "
                                           "it is scored once its newest rows are in"}, status=404)
    if view is None:
        shard = request.app[CONFIG].shard
        where = "" if shard.owns(job_id) else f" (belongs to another shard than {shard.index}/{shard.count})"
        return _error(404, "not_found", f"job {job_id} is not scored by this replica{where}")
    # a 65,536-GPU job's view is megabytes of JSON: built off the event loop, which keeps refreshing
    return web.json_response(_envelope(request, await asyncio.to_thread(view.to_json)))


async def index(request: web.Request) -> web.Response:
    config = request.app[CONFIG]
    return landing_page("lockstep analytics", "Straggler, stall and utilization-loss scores for training jobs.",
                        {"Metrics": "/metrics", "Jobs": "/api/v1/jobs"},
                        {"version": VERSION, "prometheus": redact_url(config.prometheus_url),
                         "prometheus authentication": config.prometheus_auth.describe(),
                         "shard": f"{config.shard.index}/{config.shard.count}"})


async def healthy(request: web.Request) -> web.Response:
    return web.Response(text="Healthy.\n")


def add_routes(app: web.Application) -> None:
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/api/v1/jobs", jobs)
    app.router.add_get("/api/v1/jobs/{job_id:.+}", job)   # any id reaches validation, <namespace>/<name> too
    app.router.add_get("/-/healthy", healthy)
    app.router.add_get("/", index)
