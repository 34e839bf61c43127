"""The storage exporter's aiohttp app: ``/metrics`` serves the latest background poll of every target."""
from __future__ import annotations

import asyncio
import contextlib

import aiohttp
from aiohttp import web

from lockstep.exporters.catalog import health
from lockstep.exporters.storagesys.config import StorageConfig
from lockstep.exporters.storagesys.poller import Poller
from lockstep.exporters.toolkit.exposition import Encoder, render_families
from lockstep.exporters.toolkit.httpmetrics import metrics_response
from lockstep.exporters.toolkit.sample import Sample
from lockstep.exporters.toolkit.version import VERSION
from lockstep.exporters.toolkit.web import auth_middleware, landing_page
from lockstep.exporters.toolkit.webconfig import WebConfig

POLLER = web.AppKey("poller", Poller)
ENCODER = web.AppKey("encoder", Encoder)


def create_app(config: StorageConfig, web_config: WebConfig | None = None, background: bool = True) -> web.Application:
    app = web.Application(middlewares=[auth_middleware(web_config)] if web_config else [])
    app[ENCODER] = Encoder()

    async def client(app: web.Application):
        connector = aiohttp.TCPConnector(limit=config.max_concurrency * 2)
        async with aiohttp.ClientSession(connector=connector) as session:
            app[POLLER] = Poller(config, session)
            yield

    async def polling(app: web.Application):
        task = asyncio.create_task(app[POLLER].run()) if background else None
        yield
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def metrics(request: web.Request) -> web.Response:
        samples = [Sample(health.EXPORTER_BUILD_INFO, (VERSION, "storage-exporter"), 1.0), *app[POLLER].samples()]

        def render(openmetrics: bool) -> str:
            families: dict = {}
            app[ENCODER].add(families, samples)
            return render_families(families, openmetrics)

        return await metrics_response(request, render, in_thread=len(samples) > 5000)

    async def index(request: web.Request) -> web.Response:
        return landing_page("lockstep storage exporter", "Cluster-wide storage systems: bytes, operations, errors, "
                            "latency and capacity per file system, view or bucket.", {"Metrics": "/metrics"},
                            {"version": VERSION, "targets": str(len(config.targets)),
                             "interval": f"{config.interval_s:g}s"})

    app.cleanup_ctx.extend([client, polling])
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/", index)
    return app
