"""The fast path for plain scrapes (exporters/toolkit/fastpath.py), on the node agent's app served by ``serve()`` on
a real local socket: a plain scrape is answered without aiohttp and alike; every other request, and everything
after it on its connection, is aiohttp's; the connection deadlines, the bound on waiting scrapes and a caller
hanging up hold on the fast path too. Which path answered shows in the ``Server`` field, which only aiohttp
writes."""
from __future__ import annotations

import asyncio
import contextlib
import gzip

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lockstep.exporters.catalog.model import gauge
from lockstep.exporters.config import ExporterConfig
from lockstep.exporters.scrape import Scraper
from lockstep.exporters.server import MAX_WAITING, SCRAPES, create_app
from lockstep.exporters.toolkit.conntimeouts import ConnectionTimeouts
from lockstep.exporters.toolkit.fastpath import parse_head
from lockstep.exporters.toolkit.listen import parse_listen_address
from lockstep.exporters.toolkit.sample import Sample
from lockstep.exporters.toolkit.web import serve
from lockstep.exporters.toolkit.webconfig import WebConfig
from tests.helpers.gate import Gate, reached

METRIC = gauge("lockstep_test_value", "A value.", ("item",))
PLAIN = b"GET /metrics HTTP/1.1\r\nHost: node\r\nAccept-Encoding: gzip\r\n\r\n"


class Fixed:
    """A collector with the same 50 samples at every scrape, counting its scrapes."""

    def __init__(self) -> None:
        self.scrapes = 0

    def collect(self):
        self.scrapes += 1
        return [Sample(METRIC, (str(i),), i * 1.5) for i in range(50)]


@contextlib.asynccontextmanager
async def served(collector, web_config: WebConfig | None = None, timeouts: ConnectionTimeouts | None = None):
    """The node agent's app with this one collector, served by ``serve()`` on 127.0.0.1: (port, app)."""
    app = create_app(ExporterConfig(node_name="n", web_config=web_config), Scraper({"c": collector}))
    ready = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(serve(app, parse_listen_address("127.0.0.1:0"), web_config, ready, timeouts))
    try:
        address = await asyncio.wait_for(ready, 30)
        yield int(address.rsplit(":", 1)[1]), app
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    fields = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip()
    body = await asyncio.wait_for(reader.readexactly(int(fields.get("content-length", 0))), 30)
    return status, fields, body


async def exchange(port: int, *requests: bytes, pieces: int = 1) -> list[tuple[int, dict[str, str], bytes]]:
    """Send each request (split in ``pieces`` writes) after the answer to the one before, on one connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        answers = []
        for request in requests:
            step = max(1, len(request) // pieces)
            for i in range(0, len(request), step):
                writer.write(request[i:i + step])
                await writer.drain()
                await asyncio.sleep(0)
            answers.append(await read_response(reader))
        return answers
    finally:
        writer.close()


async def closed(reader: asyncio.StreamReader) -> bool:
    return await asyncio.wait_for(reader.read(1), 30) == b""


def steady(body: bytes, encoding: str) -> bytes:
    """The exposition without the lines that change from scrape to scrape (the collector's duration)."""
    text = gzip.decompress(body) if encoding else body
    return b"\n".join(line for line in text.split(b"\n") if not line.startswith(b"lockstep_scrape_collector_duration"))


def fast(fields: dict[str, str]) -> bool:
    return "server" not in fields


# ------------------------------------------------------------------------------------------ parsing


def test_a_plain_scrape_head_is_parsed_with_lower_case_names():
    head = b"GET /metrics HTTP/1.1\r\nHost: n:9840\r\nAccept: text/plain;q=0.5, */*\r\nX-Prometheus-Scrape-Timeout-Seconds: 10"
    assert parse_head(head, b"/metrics") == {"host": "n:9840", "accept": "text/plain;q=0.5, */*",
                                             "x-prometheus-scrape-timeout-seconds": "10"}


@pytest.mark.parametrize("head", [
    b"GET /metrics HTTP/1.0\r\nHost: n",                         # HTTP/1.0: keep-alive rules of its own
    b"HEAD /metrics HTTP/1.1\r\nHost: n",
    b"GET /metrics?a=1 HTTP/1.1\r\nHost: n",
    b"GET /metricsx HTTP/1.1\r\nHost: n",
    b"GET  /metrics HTTP/1.1\r\nHost: n",
    b"GET /metrics HTTP/1.1\r\nHost: n\r\n folded",             # obsolete line folding
    b"GET /metrics HTTP/1.1\r\nHost: n\nAccept: x",             # a bare LF
    b"GET /metrics HTTP/1.1\r\nBad Name: x",
    b"GET /metrics HTTP/1.1\r\nHost: a\r\nHost: b",              # a field twice
    b"GET /metrics HTTP/1.1\r\nAccept: a\x00b",
    b"GET /metrics HTTP/1.1\r\nContent-Length: 5",
    b"GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked",
    b"GET /metrics HTTP/1.1\r\nUpgrade: websocket",
    b"GET /metrics HTTP/1.1\r\nExpect: 100-continue",
    b"GET /metrics HTTP/1.1\r\nNo-colon",
])
def test_anything_but_a_plain_get_is_left_to_aiohttp(head):
    assert parse_head(head, b"/metrics") is None


NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.", min_size=1,
                max_size=20).filter(lambda n: n.lower() not in ("content-length", "transfer-encoding", "upgrade",
                                                                   "expect"))
VALUES = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7e), max_size=40)


@given(st.dictionaries(NAMES, VALUES, max_size=8))
def test_any_plain_head_parses_to_its_fields(fields):
    unique = {k.lower(): v for k, v in fields.items()}
    if len(unique) != len(fields):
        return   # a name twice in other case: left to aiohttp, shown above
    head = b"\r\n".join([b"GET /metrics HTTP/1.1", *(f"{k}: {v}".encode() for k, v in fields.items())])
    assert parse_head(head, b"/metrics") == unique


@given(st.binary(max_size=200))
def test_no_head_fails_to_parse_with_an_exception(noise):
    parse_head(b"GET /metrics HTTP/1.1\r\n" + noise, b"/metrics")
    parse_head(noise, b"/metrics")


# ------------------------------------------------------------------------------------------ served


async def test_a_plain_scrape_is_answered_on_the_fast_path_as_aiohttp_answers_it():
    """The same scrape, once plain and once with a field twice (which the fast path leaves to aiohttp)."""
    async with served(Fixed()) as (port, _):
        for accept in ("", "application/openmetrics-text;version=1.0.0,text/plain;q=0.5"):
            for encoding in ("", "gzip"):
                fields = f"Host: n\r\nAccept: {accept}\r\nAccept-Encoding: {encoding}\r\n".encode()
                [(s1, h1, b1)] = await exchange(port, b"GET /metrics HTTP/1.1\r\n" + fields + b"\r\n")
                [(s2, h2, b2)] = await exchange(port, b"GET /metrics HTTP/1.1\r\n" + fields + b"X-A: 1\r\nX-A: 2\r\n\r\n")
                assert fast(h1) and not fast(h2)
                assert s1 == s2 == 200 and steady(b1, encoding) == steady(b2, encoding)
                assert b"lockstep_test_value" in steady(b1, encoding)
                for name in ("content-type", "content-encoding", "vary"):
                    assert h1.get(name) == h2.get(name), name
                assert h1["date"].endswith(" GMT")


async def test_a_keep_alive_connection_is_answered_request_after_request_even_byte_by_byte():
    collector = Fixed()
    async with served(collector) as (port, _):
        answers = await exchange(port, PLAIN, PLAIN, PLAIN, pieces=len(PLAIN))
    assert [s for s, _, _ in answers] == [200, 200, 200] and all(fast(h) for _, h, _ in answers)
    assert collector.scrapes == 3


@pytest.mark.parametrize("first, status", [
    (b"GET / HTTP/1.1\r\nHost: n\r\n\r\n", 200),                      # the landing page
    (b"POST /metrics HTTP/1.1\r\nHost: n\r\nContent-Length: 2\r\n\r\nab", 405),
    (b"GET /metrics?x=1 HTTP/1.1\r\nHost: n\r\n\r\n", 200),
    (b"GET /nothing HTTP/1.1\r\nHost: n\r\n\r\n", 404),
    (b"GET /metrics HTTP/1.1\r\nBad Name: x\r\n\r\n", 400),
])
async def test_any_other_request_is_aiohttps_and_so_is_the_rest_of_its_connection(first, status):
    async with served(Fixed()) as (port, _):
        answers = await exchange(port, first, *([PLAIN] if status < 400 else []))
    assert answers[0][0] == status and not fast(answers[0][1])
    assert all(s == 200 and not fast(h) for s, h, _ in answers[1:])


async def test_pipelined_scrapes_are_all_answered_in_order():
    async with served(Fixed()) as (port, _):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(PLAIN + b"GET / HTTP/1.1\r\nHost: n\r\n\r\n" + PLAIN)
        answers = [await read_response(reader) for _ in range(3)]
        writer.close()
    assert [s for s, _, _ in answers] == [200, 200, 200]
    assert b"<html>" in answers[1][2] and b"<html>" not in answers[2][2]


async def test_what_a_caller_sends_while_its_scrape_is_answered_waits_its_turn_and_goes_to_aiohttp():
    """Over 8 KiB of it (more than a plain scrape's head) stops reading from the caller until the answer is out."""
    gate = Gate()
    async with served(gate) as (port, _):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(PLAIN)
        await reached(lambda: gate.started == 1)
        writer.write(b"GET /metrics HTTP/1.1\r\nX-Junk: " + b"j" * 20_000 + b"\r\n\r\n")
        gate.release.set()
        first, second = await read_response(reader), await read_response(reader)
        writer.close()
    assert first[0] == 200 and fast(first[1])
    assert second[0] == 400 and not fast(second[1])     # aiohttp refuses a field over its 8,190 bytes


async def test_connection_close_gets_its_answer_then_the_connection_closes():
    async with served(Fixed()) as (port, _):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(PLAIN.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
        status, fields, _ = await read_response(reader)
        writer.close()
    assert status == 200 and fast(fields) and fields["connection"] == "close" and await closed(reader)


async def test_basic_auth_is_asked_for_every_scrape_and_the_web_configs_headers_are_sent():
    async with served(Fixed(), WebConfig("web.yml", basic_auth_users={"u": b"$2b$04$" + b"x" * 53})) as (port, _):
        [(status, fields, _)] = await exchange(port, PLAIN)
        assert status == 401 and not fast(fields)
    async with served(Fixed(), WebConfig("web.yml", headers={"X-Frame-Options": "deny"})) as (port, _):
        [(status, fields, _)] = await exchange(port, PLAIN)
        assert status == 200 and fast(fields) and fields["x-frame-options"] == "deny"


async def test_the_connection_deadlines_hold_on_the_fast_path():
    timeouts = ConnectionTimeouts(read_header_s=0.5, idle_s=0.5)
    async with served(Fixed(), timeouts=timeouts) as (port, _):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(PLAIN[:20])                                    # a header never finished
        assert await closed(reader)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(PLAIN)
        assert (await read_response(reader))[0] == 200
        assert await closed(reader)                                 # then silent: idle


async def test_scrapes_waiting_their_turn_on_the_fast_path_are_bounded():
    gate = Gate()
    async with served(gate) as (port, _):
        first = asyncio.create_task(exchange(port, PLAIN))
        await reached(lambda: gate.started == 1)
        rest = [asyncio.create_task(exchange(port, PLAIN)) for _ in range(MAX_WAITING + 6)]
        await reached(lambda: sum(t.done() for t in rest) == 6)    # turned away at once, the others wait
        gate.release.set()
        answers = [(await first)[0]] + [(await t)[0] for t in rest]
    statuses = [s for s, _, _ in answers]
    assert statuses.count(200) == 1 + MAX_WAITING and statuses.count(503) == 6 and all(fast(h) for _, h, _ in answers)
    assert gate.started == 1 + MAX_WAITING


async def test_a_caller_that_hung_up_while_waiting_on_the_fast_path_costs_no_scrape():
    gate = Gate()
    async with served(gate) as (port, app):
        first = asyncio.create_task(exchange(port, PLAIN))
        await reached(lambda: gate.started == 1)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(PLAIN)
        await reached(lambda: app[SCRAPES].waiting == 1)
        writer.write_eof()                                          # its scrape timeout: it shuts its side,
        assert await closed(reader)                                 # which closes the connection here
        gate.release.set()
        assert (await first)[0][0] == 200
        assert (await exchange(port, PLAIN))[0][0] == 200          # the next real scrape
    assert gate.started == 2
