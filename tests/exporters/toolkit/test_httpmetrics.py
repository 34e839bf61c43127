"""The ``/metrics`` response every lockstep service serves (``lockstep.exporters.toolkit.httpmetrics``): the format the
client's ``Accept`` asks for with its content type, gzip only where offered and allowed, the lock held
while rendering."""
from __future__ import annotations

import asyncio
import gzip
import threading

from aiohttp import web

from lockstep.exporters.toolkit.httpmetrics import metrics_response

TEXT = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
OPENMETRICS_ACCEPT = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"


def render(openmetrics: bool) -> str:
    return "up 1\n# EOF\n" if openmetrics else "up 1\n"


def app(**options) -> web.Application:
    async def metrics(request: web.Request) -> web.Response:
        return await metrics_response(request, render, **options)

    application = web.Application()
    application.router.add_get("/metrics", metrics)
    return application


async def test_format_follows_accept(aiohttp_client):
    for options in ({}, {"in_thread": False}):
        client = await aiohttp_client(app(**options))
        om = await client.get("/metrics", headers={"Accept": OPENMETRICS_ACCEPT})
        assert om.headers["Content-Type"] == OPENMETRICS and await om.text() == "up 1\n# EOF\n"
        text = await client.get("/metrics", headers={"Accept": "text/plain;version=0.0.4"})
        assert text.headers["Content-Type"] == TEXT and await text.text() == "up 1\n"
        assert "Vary" not in text.headers and "Content-Encoding" not in text.headers


async def test_gzip_only_where_offered_and_allowed(aiohttp_client):
    offered = await aiohttp_client(app(gzip=True))
    raw = await offered.get("/metrics", headers={"Accept-Encoding": "gzip"}, auto_decompress=False)
    assert raw.headers["Content-Encoding"] == "gzip" and raw.headers["Vary"] == "Accept-Encoding"
    assert gzip.decompress(await raw.read()) == b"up 1\n"
    plain = await offered.get("/metrics", headers={"Accept-Encoding": "gzip;q=0"}, auto_decompress=False)
    assert "Content-Encoding" not in plain.headers and plain.headers["Vary"] == "Accept-Encoding"
    assert await plain.read() == b"up 1\n"
    not_offered = await aiohttp_client(app())
    raw = await not_offered.get("/metrics", headers={"Accept-Encoding": "gzip"}, auto_decompress=False)
    assert "Content-Encoding" not in raw.headers and await raw.read() == b"up 1\n"


async def test_the_lock_serializes_renders_off_the_event_loop(aiohttp_client):
    lock, active, most, threads = asyncio.Lock(), [0], [0], set()
    guard = threading.Lock()

    def slow(openmetrics: bool) -> str:
        threads.add(threading.get_ident())
        with guard:
            active[0] += 1
            most[0] = max(most[0], active[0])
        threading.Event().wait(0.05)
        with guard:
            active[0] -= 1
        return "up 1\n"

    async def metrics(request: web.Request) -> web.Response:
        return await metrics_response(request, slow, lock=lock)

    application = web.Application()
    application.router.add_get("/metrics", metrics)
    client = await aiohttp_client(application)
    responses = await asyncio.gather(*(client.get("/metrics") for _ in range(4)))
    assert [r.status for r in responses] == [200] * 4
    assert most[0] == 1 and threading.get_ident() not in threads
