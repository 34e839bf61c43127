"""HTTP plumbing shared by every lockstep service: basic auth and headers from the web config,
a landing page, and serving with TLS and connection deadlines until SIGINT/SIGTERM."""
from __future__ import annotations

import asyncio
import html
import logging
import signal

from aiohttp import web

from lockstep.exporters.toolkit import looperrors
from lockstep.exporters.toolkit.basicauth import BasicAuth, Verdict
from lockstep.exporters.toolkit.conntimeouts import ConnectionTimeouts, Deadlines
from lockstep.exporters.toolkit.fastpath import FAST_ROUTE, FastPath
from lockstep.exporters.toolkit.listen import ListenAddress
from lockstep.exporters.toolkit.logs import kv
from lockstep.exporters.toolkit.openfiles import raise_open_files_limit
from lockstep.exporters.toolkit.webconfig import WebConfig, ssl_context

log = logging.getLogger("lockstep.web")


def auth_middleware(config: WebConfig):
    """Basic auth (``lockstep.exporters.toolkit.basicauth``) and the web config's response headers."""
    auth = BasicAuth(config.basic_auth_users) if config.basic_auth_users else None

    @web.middleware
    async def middleware(request: web.Request, handler):
        if auth is not None:
            verdict = await auth.check(request.headers.get("Authorization", ""))
            if verdict is Verdict.BUSY:
                return web.Response(status=503, text="Too many pending authentication checks\n",
                                    headers={"Retry-After": "1"})
            if verdict is not Verdict.OK:
                return web.Response(status=401, text="Unauthorized\n",
                                    headers={"WWW-Authenticate": 'Basic realm="lockstep"'})
        response = await handler(request)
        response.headers.update(config.headers)
        return response

    return middleware


def landing_page(title: str, description: str, links: dict[str, str], details: dict[str, str]) -> web.Response:
    items = "".join(f'<li><a href="{html.escape(href)}">{html.escape(text)}</a></li>' for text, href in links.items())
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in details.items())
    body = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head>"
            f"<body><h1>{html.escape(title)}</h1><p>{html.escape(description)}</p><ul>{items}</ul>"
            f"<table>{rows}</table></body></html>")
    return web.Response(text=body, content_type="text/html")


async def serve(app: web.Application, listen: ListenAddress, web_config: WebConfig | None,
                ready: "asyncio.Future[str] | None" = None, timeouts: ConnectionTimeouts | None = None) -> None:
    """Serve ``app`` until SIGINT/SIGTERM; logs (and resolves ``ready`` with) the bound address. Every
    connection is held to ``timeouts`` (``lockstep.exporters.toolkit.conntimeouts``), the open-files limit
    is lifted, and the event loop's own error reports (a flood of failed accepts) are rate-limited."""
    timeouts = timeouts or ConnectionTimeouts()
    loop = asyncio.get_running_loop()
    looperrors.install(loop)
    open_files = raise_open_files_limit()
    deadlines = Deadlines(timeouts)
    app.middlewares.insert(0, deadlines.middleware)   # first: a request reached the app, its headers are in
    # aiohttp's own keep-alive timer (an hour by default) counts from the same moments as the idle timeout
    # but through a header too: a backstop only, as long as idle time and a header may take together
    runner = web.AppRunner(app, access_log=None, handle_signals=False,
                           keepalive_timeout=timeouts.idle_s + timeouts.read_header_s)
    await runner.setup()
    ssl = ssl_context(web_config) if web_config else None
    protocol = runner.server
    route = app.get(FAST_ROUTE)
    if route is not None and not (web_config and web_config.basic_auth_users):
        protocol = FastPath(route, deadlines, web_config.headers if web_config else None).protocol_factory(protocol)
    try:
        server = await loop.create_server(deadlines.protocol_factory(protocol), listen.host, listen.port,
                                          ssl=ssl, backlog=128, reuse_address=True)
    except OSError as exc:
        await runner.cleanup()
        raise SystemExit(f"error: cannot listen on {listen}: {exc.strerror or exc} "
                         "(is another process using the port? pick one with --web.listen-address)") from None
    host, port = server.sockets[0].getsockname()[:2]
    address = f"{'https' if ssl else 'http'}://{host}:{port}"
    log.info("listening", extra=kv(address=address, tls=bool(ssl), read_header_timeout_s=timeouts.read_header_s,
                                   idle_timeout_s=timeouts.idle_s, open_files_limit=open_files))
    if ready is not None and not ready.done():
        ready.set_result(address)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        log.info("shutting down")
        server.close()
        await runner.cleanup()
