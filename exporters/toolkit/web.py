"""HTTP plumbing shared by every lockstep service: basic auth and headers from the web config,
a landing page, and serving with TLS until SIGINT/SIGTERM."""
from __future__ import annotations

import asyncio
import html
import logging
import signal

from aiohttp import web

from lockstep.exporters.toolkit.basicauth import BasicAuth, Verdict
from lockstep.exporters.toolkit.listen import ListenAddress
from lockstep.exporters.toolkit.logs import kv
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
                ready: "asyncio.Future[str] | None" = None) -> None:
    """Serve ``app`` until SIGINT/SIGTERM; logs (and resolves ``ready`` with) the bound address."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    ssl = ssl_context(web_config) if web_config else None
    site = web.TCPSite(runner, listen.host, listen.port, ssl_context=ssl, reuse_address=True)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise SystemExit(f"error: cannot listen on {listen}: {exc.strerror or exc} "
                         "(is another process using the port? pick one with --web.listen-address)") from None
    host, port = runner.addresses[0][:2]
    address = f"{'https' if ssl else 'http'}://{host}:{port}"
    log.info("listening", extra=kv(address=address, tls=bool(ssl)))
    if ready is not None and not ready.done():
        ready.set_result(address)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        log.info("shutting down")
        await runner.cleanup()
