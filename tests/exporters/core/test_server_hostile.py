"""The node agent's /metrics against callers that pile up or hang up, on a real local server: the
scrapes waiting for their turn are bounded, and a caller gone while waiting costs no scrape."""
from __future__ import annotations

import asyncio

import aiohttp

from lockstep.exporters.config import ExporterConfig
from lockstep.exporters.scrape import Scraper
from lockstep.exporters.server import MAX_WAITING, SCRAPES, create_app
from tests.helpers.gate import Gate, reached


async def test_scrapes_waiting_for_their_turn_are_bounded(aiohttp_server):
    """Before: every caller queued on the scrape lock without limit."""
    gate = Gate()
    server = await aiohttp_server(create_app(ExporterConfig(node_name="n"), Scraper({"gate": gate})))
    async with aiohttp.ClientSession() as session:
        async def scrape() -> int:
            async with session.get(server.make_url("/metrics")) as response:
                return response.status

        first = asyncio.create_task(scrape())
        await reached(lambda: gate.started == 1)
        rest = [asyncio.create_task(scrape()) for _ in range(MAX_WAITING + 6)]
        await reached(lambda: sum(t.done() for t in rest) == 6)  # turned away at once, the others wait
        gate.release.set()
        statuses = [await first] + [await t for t in rest]
    assert statuses.count(200) == 1 + MAX_WAITING and statuses.count(503) == 6
    assert gate.started == 1 + MAX_WAITING


async def test_a_caller_that_hung_up_while_waiting_costs_no_scrape(aiohttp_server):
    """Before: a scrape whose caller had gone (Prometheus' scrape timeout) still ran when its turn
    came, collectors, lctl and all."""
    gate = Gate()
    server = await aiohttp_server(create_app(ExporterConfig(node_name="n"), Scraper({"gate": gate})))
    async with aiohttp.ClientSession() as session:
        first = asyncio.create_task(session.get(server.make_url("/metrics")))
        await reached(lambda: gate.started == 1)
        impatient = asyncio.create_task(session.get(server.make_url("/metrics")))
        await reached(lambda: server.app[SCRAPES].waiting == 1)
        impatient.cancel()  # the connection closes while the request waits for the lock
        await asyncio.sleep(0)
        gate.release.set()
        response = await first
        assert response.status == 200
        response.release()
        async with session.get(server.make_url("/metrics")) as later:  # the next real scrape
            assert later.status == 200
    assert gate.started == 2  # the first and the later one; not the one whose caller hung up
