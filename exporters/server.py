"""The node agent's HTTP app: ``/metrics`` (text or OpenMetrics by Accept) and a landing page.

A plain scrape of ``/metrics`` (what Prometheus sends) is also answered by ``serve()``'s fast path
(``lockstep.exporters.toolkit.fastpath``) without aiohttp's request machinery; both ways go through
``Scrapes.answer``, so they answer alike."""
from __future__ import annotations

import asyncio
from typing import Callable

from aiohttp import web

from lockstep.exporters.config import ExporterConfig
from lockstep.exporters.scrape import Scraper
from lockstep.exporters.toolkit.fastpath import FAST_ROUTE, FastRoute, Reply
from lockstep.exporters.toolkit.httpmetrics import metrics_reply
from lockstep.exporters.toolkit.renderthread import RenderThread
from lockstep.exporters.toolkit.version import VERSION
from lockstep.exporters.toolkit.web import auth_middleware, landing_page

# Scrapes run one at a time; this many more may wait for their turn, and any past that are answered
# 503 at once. Unbounded, a caller (or a Prometheus pair after a stall) could queue scrapes without
# end, each holding a connection and, once its turn came, a whole collection pass.
MAX_WAITING = 4
BUSY = Reply(503, {"Content-Type": "text/plain; charset=utf-8", "Retry-After": "1"}, b"too many scrapes waiting\n")
# The caller hung up while waiting (its scrape timeout): a scrape now would be thrown away, and may
# start lctl for nothing.
GONE = Reply(499, {}, b"")


class Scrapes:
    """The agent's scrapes: one at a time in the render thread, at most ``MAX_WAITING`` waiting."""

    def __init__(self, scraper: Scraper) -> None:
        self.scraper = scraper
        self.lock = asyncio.Lock()
        self.waiting = 0
        self.thread = RenderThread("scrape")

    async def answer(self, accept: str, accept_encoding: str, gone: Callable[[], bool]) -> Reply:
        """The answer to a scrape with these headers; ``gone()``: whether its caller has hung up."""
        if self.waiting >= MAX_WAITING and self.lock.locked():
            return BUSY
        self.waiting += 1
        queued = True
        try:
            async with self.lock:
                self.waiting, queued = self.waiting - 1, False
                if gone():
                    return GONE
                body, headers = await metrics_reply(self.scraper.render, accept, accept_encoding, gzip=True,
                                                    thread=self.thread)
                return Reply(200, headers, body)
        finally:
            if queued:   # cancelled while waiting
                self.waiting -= 1

    def close(self) -> None:
        self.thread.close()
        self.scraper.close()


SCRAPES = web.AppKey("scrapes", Scrapes)


def create_app(config: ExporterConfig, scraper: Scraper) -> web.Application:
    middlewares = [auth_middleware(config.web_config)] if config.web_config else []
    app = web.Application(middlewares=middlewares)
    scrapes = app[SCRAPES] = Scrapes(scraper)
    app[FAST_ROUTE] = FastRoute(config.telemetry_path, scrapes.answer)

    async def metrics(request: web.Request) -> web.Response:
        reply = await scrapes.answer(request.headers.get("Accept", ""), request.headers.get("Accept-Encoding", ""),
                                     lambda: request.transport is None or request.transport.is_closing())
        return web.Response(status=reply.status, body=reply.body, headers=reply.headers)

    async def index(request: web.Request) -> web.Response:
        return landing_page(
            "lockstep exporter", "Node agent of lockstep: GPU, fabric and storage telemetry for training clusters.",
            {"Metrics": config.telemetry_path},
            {"version": VERSION, "node": config.node_name, "collectors": ", ".join(config.collectors) or "(none)"})

    async def scrapes_cleanup(app: web.Application):
        yield
        await asyncio.to_thread(app[SCRAPES].close)

    app.router.add_get(config.telemetry_path, metrics)
    if config.telemetry_path != "/":
        app.router.add_get("/", index)
    app.cleanup_ctx.append(scrapes_cleanup)
    return app
