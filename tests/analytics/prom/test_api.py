"""``source_prom`` against an aiohttp server speaking the Prometheus HTTP API.

Decoding a large job's answer takes a second of CPU; done on the event loop it would stall
``/metrics`` and the JSON API for as long, so a large answer is decoded in a worker thread. A refused
query is reported with Prometheus' own message; a malformed answer fails with one error type.
"""
from __future__ import annotations

import threading

import aiohttp
import pytest
from aiohttp import web

from lockstep.analytics.prom import api as source_prom
from lockstep.analytics.prom import decode
from lockstep.analytics.prom.errors import MalformedAnswer, PrometheusError
from lockstep.analytics.prom.grid import Window
from tests.helpers.paths import FIXTURES

ANSWERS = FIXTURES / "analytics/answers"
GRID = Window(1767225890.0, 1767225910.0, 5.0)


def _prometheus() -> web.Application:
    """Answers each range query (POSTed: a query naming thousands of nodes is long), named by its text
    (sm, bad, big), with a capture (bad: HTTP 400)."""
    async def query_range(request: web.Request) -> web.Response:
        name = {"sm": "prometheus-sm", "bad": "prometheus-error", "big": "big"}[(await request.post())["query"]]
        body = _big() if name == "big" else (ANSWERS / f"{name}.json").read_bytes()
        return web.Response(body=body, status=400 if name == "prometheus-error" else 200,
                            content_type="application/json")

    app = web.Application()
    app.router.add_post("/prefix/api/v1/query_range", query_range)
    return app


def _big() -> bytes:
    """The sm capture's series repeated until the answer is well over the inline limit."""
    good = (ANSWERS / "prometheus-sm.json").read_bytes()
    head, _, rest = good.partition(b'"result":[')
    series, _, tail = rest.rpartition(b"]")
    return head + b'"result":[' + b",".join([series] * 300) + b"]" + tail


async def _range(server, query: str, monkeypatch=None) -> tuple:
    threads, real = [], decode.decode_matrix

    def spy(body, grid):
        threads.append(threading.get_ident())
        return real(body, grid)

    if monkeypatch is not None:
        monkeypatch.setattr(source_prom, "decode_matrix", spy)
    async with aiohttp.ClientSession() as session:
        block = await source_prom.query_range(session, str(server.make_url("/prefix")), query, GRID, timeout=5.0)
    return block, threads


async def test_a_small_answer_is_decoded_inline_a_large_one_off_the_event_loop(aiohttp_server, monkeypatch):
    server = await aiohttp_server(_prometheus())
    small, inline = await _range(server, "sm", monkeypatch)
    assert small.samples == 32 and inline == [threading.get_ident()]
    big, off = await _range(server, "big", monkeypatch)
    assert len(big.labels) == 2400 and big.samples == 300 * 32
    assert len(off) == 1 and off[0] != threading.get_ident()


async def test_a_refused_query_reports_prometheus_message(aiohttp_server):
    server = await aiohttp_server(_prometheus())
    refused = r'/prefix/api/v1/query_range: HTTP 400: 1:14: parse error: unexpected "\("'
    with pytest.raises(PrometheusError, match=refused):
        await _range(server, "bad")


async def test_a_malformed_answer_names_the_url_and_is_one_error_type(aiohttp_server, monkeypatch):
    server = await aiohttp_server(_prometheus())
    monkeypatch.setattr(source_prom, "decode_matrix", lambda body, grid: decode.decode_matrix(body[:50], grid))
    with pytest.raises(MalformedAnswer, match="/prefix/api/v1/query_range: not JSON"):
        await _range(server, "sm")


async def test_unreachable_prometheus_is_an_error_not_a_crash():
    async with aiohttp.ClientSession() as session:
        with pytest.raises(PrometheusError, match="ClientConnectorError|ClientOSError"):
            await source_prom.query_range(session, "http://127.0.0.1:9", "sm", GRID, timeout=5.0)


@pytest.mark.parametrize("body", [b'{"status":"success"}', b'{"status":"success","data":{"result":7}}',
                                  b'{"status":"success","data":' + b"[" * 100_000 + b"]" * 100_000 + b"}"])
async def test_an_instant_answer_of_the_wrong_shape_is_one_error_type(aiohttp_server, body):
    async def answer(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_get("/api/v1/query", answer)
    server = await aiohttp_server(app)
    async with aiohttp.ClientSession() as session:
        with pytest.raises(PrometheusError, match="/api/v1/query: "):
            await source_prom.api_get(session, str(server.make_url("")), "/api/v1/query", {"query": "up"}, 5.0)
