"""The power exporter's aiohttp app: ``/metrics`` (cached background polls of every target) and
``/probe?target=NAME`` (a fresh poll of one target, the blackbox/snmp exporter pattern)."""
from __future__ import annotations

import asyncio
import contextlib
import math
from dataclasses import dataclass
from typing import Iterable

import aiohttp
from aiohttp import web

from lockstep.exporters.catalog import health
from lockstep.exporters.catalog import power as m
from lockstep.exporters.power.config import PowerConfig
from lockstep.exporters.power.poller import Poller
from lockstep.exporters.power.redfish import HttpRedfish
from lockstep.exporters.toolkit.exposition import Encoder, render_families
from lockstep.exporters.toolkit.httpmetrics import metrics_response
from lockstep.exporters.toolkit.sample import Sample
from lockstep.exporters.toolkit.version import VERSION
from lockstep.exporters.toolkit.web import auth_middleware, landing_page
from lockstep.exporters.toolkit.webconfig import WebConfig

POLLER = web.AppKey("poller", Poller)
ENCODER = web.AppKey("encoder", Encoder)
_DEFAULT_PROBE_BUDGET_S = 10.0


@dataclass(frozen=True)
class AppOptions:
    background: bool = True  # poll every interval_s for /metrics; off: /probe only
    web_config: WebConfig | None = None


async def _render(request: web.Request, samples: Iterable[Sample]) -> web.Response:
    def render(openmetrics: bool) -> str:
        families: dict = {}
        request.app[ENCODER].add(families, samples)
        return render_families(families, openmetrics)

    return await metrics_response(request, render, in_thread=False)   # a few samples per target: cheap


def _build_info() -> Sample:
    return Sample(health.EXPORTER_BUILD_INFO, (VERSION, "power-exporter"), 1.0)


async def metrics(request: web.Request) -> web.Response:
    return await _render(request, [_build_info(), *request.app[POLLER].samples()])


def probe_budget(request: web.Request, config: PowerConfig) -> float:
    """Half a second less than Prometheus' scrape timeout, so the answer beats it; never less than
    one request's timeout_s, whatever the caller's header says (``0`` would make every probe fail)."""
    header = request.headers.get("X-Prometheus-Scrape-Timeout-Seconds")
    try:
        budget = float(header) - 0.5 if header else _DEFAULT_PROBE_BUDGET_S
    except ValueError:
        budget = _DEFAULT_PROBE_BUDGET_S
    if not math.isfinite(budget):
        budget = _DEFAULT_PROBE_BUDGET_S
    return max(config.timeout_s, min(budget, config.interval_s * 4))


async def probe(request: web.Request) -> web.Response:
    poller = request.app[POLLER]
    name = request.query.get("target", "")
    target = poller.config.target(name)
    if target is None:
        raise web.HTTPBadRequest(text=f"unknown target {name!r}: name one from the config\n")
    result = await poller.poll(target, probe_budget(request, poller.config))
    samples: list[Sample] = list(poller.target_samples(target, result))
    samples = [s for s in samples if s.metric is not m.REDFISH_LAST_SUCCESS]  # a probe has no history
    if target.budget_watts is not None:
        samples.append(Sample(m.RACK_BUDGET, (target.rack,), target.budget_watts))
    return await _render(request, samples)


def create_app(config: PowerConfig, options: AppOptions = AppOptions()) -> web.Application:
    middlewares = [auth_middleware(options.web_config)] if options.web_config else []
    app = web.Application(middlewares=middlewares)
    app[ENCODER] = Encoder()

    async def client(app: web.Application):
        connector = aiohttp.TCPConnector(limit=config.max_concurrency * 4)
        async with aiohttp.ClientSession(connector=connector) as session:
            app[POLLER] = Poller(config, HttpRedfish(session, config.retries))
            yield

    async def background(app: web.Application):
        task = asyncio.create_task(app[POLLER].run()) if options.background else None
        yield
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def index(request: web.Request) -> web.Response:
        return landing_page("lockstep power exporter", "Rack power and cooling from Redfish/IPMI BMCs, PDUs, CDUs.",
                            {"Metrics": "/metrics", **{f"Probe {t.name}": f"/probe?target={t.name}"
                                                       for t in config.targets[:20]}},
                            {"version": VERSION, "targets": str(len(config.targets)),
                             "interval": f"{config.interval_s:g}s"})

    async def stop_polls(app: web.Application) -> None:
        # Shutdown waits for the requests in flight: a /probe of a slow target would hold SIGTERM for
        # the rest of its budget (up to four intervals) without this.
        app[POLLER].close()

    app.cleanup_ctx.extend([client, background])
    app.on_shutdown.append(stop_polls)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/probe", probe)
    app.router.add_get("/", index)
    return app
