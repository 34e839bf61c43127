"""``lockstep analytics serve``: refresh scores from Prometheus every interval, serve them.

Endpoints: ``/metrics`` (analytics metrics of the catalog, text or OpenMetrics), ``/api/v1/jobs``,
``/api/v1/jobs/{job_id}`` (JSON). Prometheus down or slow: the last results stay served, marked
stale, and the refresh is retried with a doubling backoff; the service reports its own health.

This module is the app and its lifecycle; one refresh is ``lockstep.analytics.service.refresh``, the handlers are
``lockstep.analytics.service.routes``.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging

from aiohttp import web

from lockstep.analytics.prom.session import Credentials, open_session
from lockstep.analytics.service import routes
from lockstep.analytics.service.config import ServiceConfig
from lockstep.analytics.service.keys import CONFIG, CREDENTIALS, ENCODER, REFRESHED, SOURCE, STATE
from lockstep.analytics.service.peers import PeerRefresher
from lockstep.analytics.service.refresh import Refresher, RefreshState
from lockstep.analytics.service.source import PrometheusSource
from lockstep.exporters.toolkit.exposition import Encoder
from lockstep.exporters.toolkit.logs import kv, redact_with
from lockstep.exporters.toolkit.version import VERSION
from lockstep.exporters.toolkit.web import auth_middleware

log = logging.getLogger("lockstep.analytics")


def create_app(config: ServiceConfig) -> web.Application:
    app = web.Application(middlewares=[auth_middleware(config.web_config)] if config.web_config else [])
    app[CONFIG] = config
    app[STATE] = RefreshState()
    app[ENCODER] = Encoder()
    app[REFRESHED] = asyncio.Event()
    app[CREDENTIALS] = Credentials(config.prometheus_auth)
    redact_with(app[CREDENTIALS].redact)
    app.cleanup_ctx.append(_source_ctx)
    app.cleanup_ctx.append(_refresh_ctx)
    routes.add_routes(app)
    return app


async def _source_ctx(app: web.Application):
    cfg = app[CONFIG]
    async with open_session(cfg.prometheus_url, cfg.prometheus_auth, app[CREDENTIALS],
                            user_agent=f"lockstep-analytics/{VERSION}") as session:
        app[SOURCE] = PrometheusSource(session, cfg.prometheus_url, cfg.timeout_s, cfg.resume_lookback_s,
                                       cfg.recorded_inputs, cfg.max_answer_bytes)
        yield


async def _refresh_ctx(app: web.Application):
    refresher = Refresher(app[SOURCE], app[CONFIG], app[STATE])
    fleet = PeerRefresher(app[SOURCE], recorded=app[CONFIG].recorded_inputs) \
        if app[CONFIG].shard.index == 0 else None   # one fleet answer, not n
    task = asyncio.create_task(refresh_loop(refresher, app[CONFIG], app[REFRESHED], fleet))
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def refresh_loop(refresher: Refresher, cfg: ServiceConfig, refreshed: asyncio.Event,
                       fleet: PeerRefresher | None = None) -> None:
    """Refresh every ``interval_s``, at once while a job's window is still being fetched; after failures,
    with a doubling backoff up to ``max_backoff_s``. The fleet pass runs after a refresh that left no job's
    window half fetched (a job's first result comes first); its failure loses only its own update (the last
    one stays served)."""
    failed_in_row = 0
    while True:
        try:
            await refresher.refresh(cfg.now())
            failed_in_row, delay = 0, 0.0 if refresher.state.fills.cut_short else cfg.interval_s
        except Exception as exc:  # failure stays local: keep serving the last results
            failed_in_row += 1
            delay = min(cfg.max_backoff_s, cfg.interval_s * 2 ** (failed_in_row - 1))
            refresher.failed(exc)
            log.warning("refresh failed; serving last results",
                        extra=kv(err=refresher.state.health.last_error, retry_in_s=delay))
        if fleet is not None and not refresher.state.fills.cut_short:
            try:
                refresher.state.peers = await fleet.refresh(cfg.now())
            except Exception as exc:  # failure stays local: the jobs' results are unaffected
                log.warning("fleet pass failed; serving its last results", extra=kv(err=f"{type(exc).__name__}: {exc}"))
        refreshed.set()
        await asyncio.sleep(delay)
