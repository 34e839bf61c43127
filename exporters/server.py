"""The node agent's HTTP app: ``/metrics`` (text or OpenMetrics by Accept) and a landing page."""
from __future__ import annotations

import asyncio
import zlib

from aiohttp import web

from exporters.config import ExporterConfig
from exporters.exposition import OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE, wants_openmetrics
from exporters.scrape import Scraper
from exporters.version import VERSION
from exporters.web import auth_middleware, landing_page

SCRAPER = web.AppKey("scraper", Scraper)
SCRAPE_LOCK = web.AppKey("scrape_lock", asyncio.Lock)
# A scrape is ~65 KB of repetitive text: gzip level 1 costs a third of zlib's default level 6 (0.3 vs
# 0.9 ms of CPU on a full H100 node) for a body 15 % larger. Compressing in the render thread also
# saves aiohttp's second executor hop for bodies over 4 KiB.
GZIP_LEVEL = 1
# Scrapes run one at a time; this many more may wait for their turn, and any past that are answered
# 503 at once. Unbounded, a caller (or a Prometheus pair after a stall) could queue scrapes without
# end, each holding a connection and, once its turn came, a whole collection pass.
MAX_WAITING = 4
WAITING = web.AppKey("waiting", list)


def accepts_gzip(header: str) -> bool:
    """``Accept-Encoding`` (RFC 9110 §12.5.3) allows gzip: named (or ``x-gzip``, or ``*`` when gzip is
    not named) with a q-value above 0; ``gzip;q=0`` means "never gzip"."""
    star = None
    for item in header.split(","):
        coding, *params = (part.strip() for part in item.split(";"))
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        coding = coding.lower()
        if coding in ("gzip", "x-gzip"):
            return q > 0
        if coding == "*":
            star = q > 0
    return bool(star)


def render_body(scraper: Scraper, openmetrics: bool, gzip: bool) -> bytes:
    body = scraper.render(openmetrics).encode()
    if not gzip:
        return body
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # 16+: gzip framing
    return compressor.compress(body) + compressor.flush()


def create_app(config: ExporterConfig, scraper: Scraper) -> web.Application:
    middlewares = [auth_middleware(config.web_config)] if config.web_config else []
    app = web.Application(middlewares=middlewares)
    app[SCRAPER] = scraper
    app[SCRAPE_LOCK] = asyncio.Lock()
    app[WAITING] = []

    async def metrics(request: web.Request) -> web.Response:
        openmetrics = wants_openmetrics(request.headers.get("Accept", ""))
        gzip = accepts_gzip(request.headers.get("Accept-Encoding", ""))
        waiting = request.app[WAITING]
        if len(waiting) >= MAX_WAITING and request.app[SCRAPE_LOCK].locked():
            return web.Response(status=503, text="too many scrapes waiting\n", headers={"Retry-After": "1"})
        waiting.append(request)
        try:
            async with request.app[SCRAPE_LOCK]:
                waiting.remove(request)
                if request.transport is None or request.transport.is_closing():
                    # The caller hung up while waiting (its scrape timeout): a scrape now would be
                    # thrown away, and may start lctl for nothing.
                    return web.Response(status=499)
                body = await asyncio.to_thread(render_body, request.app[SCRAPER], openmetrics, gzip)
        finally:
            if request in waiting:
                waiting.remove(request)
        response = web.Response(body=body)
        response.headers["Content-Type"] = OPENMETRICS_CONTENT_TYPE if openmetrics else TEXT_CONTENT_TYPE
        if gzip:
            response.headers["Content-Encoding"] = "gzip"
        response.headers["Vary"] = "Accept-Encoding"
        return response

    async def index(request: web.Request) -> web.Response:
        return landing_page(
            "lockstep exporter", "Node agent of lockstep: GPU, fabric and storage telemetry for training clusters.",
            {"Metrics": config.telemetry_path},
            {"version": VERSION, "node": config.node_name, "collectors": ", ".join(config.collectors) or "(none)"})

    async def scraper_cleanup(app: web.Application):
        yield
        await asyncio.to_thread(app[SCRAPER].close)

    app.router.add_get(config.telemetry_path, metrics)
    if config.telemetry_path != "/":
        app.router.add_get("/", index)
    app.cleanup_ctx.append(scraper_cleanup)
    return app
