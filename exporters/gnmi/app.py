"""The switch exporter's aiohttp app: ``/metrics`` serves the last value of every subscribed series."""
from __future__ import annotations

from aiohttp import web

from lockstep.exporters.catalog import health
from lockstep.exporters.gnmi.config import SwitchConfig
from lockstep.exporters.gnmi.subscriber import Subscriber
from lockstep.exporters.toolkit.exposition import Encoder, render_families
from lockstep.exporters.toolkit.httpmetrics import metrics_response
from lockstep.exporters.toolkit.sample import Sample
from lockstep.exporters.toolkit.version import VERSION
from lockstep.exporters.toolkit.web import auth_middleware, landing_page
from lockstep.exporters.toolkit.webconfig import WebConfig

SUBSCRIBER = web.AppKey("subscriber", Subscriber)
ENCODER = web.AppKey("encoder", Encoder)


def create_app(config: SwitchConfig, web_config: WebConfig | None = None) -> web.Application:
    app = web.Application(middlewares=[auth_middleware(web_config)] if web_config else [])
    app[ENCODER] = Encoder()

    async def subscriptions(app: web.Application):
        app[SUBSCRIBER] = Subscriber(config)
        app[SUBSCRIBER].start()
        yield
        app[SUBSCRIBER].stop()

    async def metrics(request: web.Request) -> web.Response:
        samples = [Sample(health.EXPORTER_BUILD_INFO, (VERSION, "switch-exporter"), 1.0), *app[SUBSCRIBER].samples()]

        def render(openmetrics: bool) -> str:
            families: dict = {}
            app[ENCODER].add(families, samples)
            return render_families(families, openmetrics)

        return await metrics_response(request, render, in_thread=False)

    async def index(request: web.Request) -> web.Response:
        return landing_page("lockstep switch exporter", "Switch PFC, ECN, queues and PFC watchdog over gNMI.",
                            {"Metrics": "/metrics"}, {"version": VERSION, "targets": str(len(config.targets))})

    app.cleanup_ctx.append(subscriptions)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/", index)
    return app
