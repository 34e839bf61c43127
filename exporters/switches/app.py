"""The fabric exporter's aiohttp app: ``/metrics`` serves the last complete sweep; one background task
sweeps every interval (in a thread: the sweep runs subprocesses and blocks)."""
from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from aiohttp import web

from lockstep.exporters.catalog import health
from lockstep.exporters.switches.config import FabricConfig
from lockstep.exporters.switches.state import FabricState
from lockstep.exporters.switches.sweep import DiscoveryFailed, Runner, sweep
from lockstep.exporters.switches.tools import run as run_tool
from lockstep.exporters.toolkit.exposition import Encoder, render_families
from lockstep.exporters.toolkit.httpmetrics import metrics_response
from lockstep.exporters.toolkit.rounds import every
from lockstep.exporters.toolkit.sample import Sample
from lockstep.exporters.toolkit.version import VERSION
from lockstep.exporters.toolkit.web import auth_middleware, landing_page
from lockstep.exporters.toolkit.webconfig import WebConfig

log = logging.getLogger("lockstep.fabric")
STATE = web.AppKey("state", FabricState)
ENCODER = web.AppKey("encoder", Encoder)


@dataclass(frozen=True)
class AppOptions:
    web_config: WebConfig | None = None
    runner: Runner = run_tool


async def sweep_once(state: FabricState, runner: Runner = run_tool) -> None:
    try:
        result = await asyncio.to_thread(sweep, state.config, runner)
    except DiscoveryFailed as exc:
        state.record_failure(exc)
    except Exception as exc:   # a sweep that breaks otherwise must not end the loop: the exporter would go stale
        log.exception("fabric sweep broke; trying again next interval")
        state.record_failure(DiscoveryFailed(f"sweep broke: {type(exc).__name__}: {exc}", no_infiniband=False))
    else:
        state.record(result)


async def sweep_forever(state: FabricState, runner: Runner = run_tool) -> None:
    """One sweep per interval; a sweep longer than the interval delays the next, never overlaps it."""
    await every(state.config.interval_s, lambda: sweep_once(state, runner))


async def metrics(request: web.Request) -> web.Response:
    samples = [Sample(health.EXPORTER_BUILD_INFO, (VERSION, "fabric-exporter"), 1.0), *request.app[STATE].samples()]

    def render(openmetrics: bool) -> str:
        families: dict = {}
        request.app[ENCODER].add(families, samples)
        return render_families(families, openmetrics)

    return await metrics_response(request, render)


def create_app(config: FabricConfig, options: AppOptions = AppOptions()) -> web.Application:
    app = web.Application(middlewares=[auth_middleware(options.web_config)] if options.web_config else [])
    app[STATE], app[ENCODER] = FabricState(config), Encoder()

    async def background(app: web.Application):
        task = asyncio.create_task(sweep_forever(app[STATE], options.runner))
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def index(request: web.Request) -> web.Response:
        return landing_page("lockstep fabric exporter", "InfiniBand switch and HCA ports from ibnetdiscover and perfquery.",
                            {"Metrics": "/metrics"}, {"version": VERSION, "interval": f"{config.interval_s:g}s"})

    app.cleanup_ctx.append(background)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/", index)
    return app
