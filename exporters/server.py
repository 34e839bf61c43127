"""The node agent's HTTP app: ``/metrics`` (text or OpenMetrics by Accept) and a landing page."""
from __future__ import annotations

import asyncio

from aiohttp import web

from lockstep.exporters.config import ExporterConfig
from lockstep.exporters.scrape import Scraper
from lockstep.exporters.toolkit.httpmetrics import metrics_response
from lockstep.exporters.toolkit.renderthread import RenderThread
from lockstep.exporters.toolkit.version import VERSION
from lockstep.exporters.toolkit.web import auth_middleware, landing_page

SCRAPER = web.AppKey("scraper", Scraper)
SCRAPE_LOCK = web.AppKey("scrape_lock", asyncio.Lock)
# Scrapes run one at a time; this many more may wait for their turn, and any past that are answered
# 503 at once. Unbounded, a caller (or a Prometheus pair after a stall) could queue scrapes without
# end, each holding a connection and, once its turn came, a whole collection pass.
MAX_WAITING = 4
WAITING = web.AppKey("waiting", list)
RENDER_THREAD = web.AppKey("render_thread", RenderThread)


def create_app(config: ExporterConfig, scraper: Scraper) -> web.Application:
    middlewares = [auth_middleware(config.web_config)] if config.web_config else []
    app = web.Application(middlewares=middlewares)
    app[SCRAPER] = scraper
    app[SCRAPE_LOCK] = asyncio.Lock()
    app[WAITING] = []
    app[RENDER_THREAD] = RenderThread("scrape")

    async def metrics(request: web.Request) -> web.Response:
        waiting, lock = request.app[WAITING], request.app[SCRAPE_LOCK]
        if len(waiting) >= MAX_WAITING and lock.locked():
            return web.Response(status=503, text="too many scrapes waiting\n", headers={"Retry-After": "1"})
        waiting.append(request)
        try:
            async with lock:
                waiting.remove(request)
                if request.transport is None or request.transport.is_closing():
                    # The caller hung up while waiting (its scrape timeout): a scrape now would be
                    # thrown away, and may start lctl for nothing.
                    return web.Response(status=499)
                return await metrics_response(request, request.app[SCRAPER].render, gzip=True,
                                              thread=request.app[RENDER_THREAD])
        finally:
            if request in waiting:
                waiting.remove(request)

    async def index(request: web.Request) -> web.Response:
        return landing_page(
            "lockstep exporter", "Node agent of lockstep: GPU, fabric and storage telemetry for training clusters.",
            {"Metrics": config.telemetry_path},
            {"version": VERSION, "node": config.node_name, "collectors": ", ".join(config.collectors) or "(none)"})

    async def scraper_cleanup(app: web.Application):
        yield
        app[RENDER_THREAD].close()
        await asyncio.to_thread(app[SCRAPER].close)

    app.router.add_get(config.telemetry_path, metrics)
    if config.telemetry_path != "/":
        app.router.add_get("/", index)
    app.cleanup_ctx.append(scraper_cleanup)
    return app
