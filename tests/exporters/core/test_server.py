"""The node agent's HTTP layer in process (``aiohttp_client``): the basic-auth middleware of
``lockstep.exporters.toolkit.web`` and the ``/metrics`` handler of ``lockstep.exporters.server``. The real process, TLS and the
web config file are tested in tests/exporters/core/test_process.py."""
from __future__ import annotations

import gzip
import threading
from base64 import b64encode

import bcrypt
from aiohttp import web

from lockstep.exporters.catalog import fabric
from lockstep.exporters.config import ExporterConfig
from lockstep.exporters.scrape import Scraper
from lockstep.exporters.server import create_app
from lockstep.exporters.toolkit import basicauth
from lockstep.exporters.toolkit import web as lweb
from lockstep.exporters.toolkit.sample import Sample
from lockstep.exporters.toolkit.webconfig import WebConfig


async def test_bcrypt_check_runs_off_the_event_loop(aiohttp_client, monkeypatch):
    """Before: bcrypt.checkpw ran in the event loop, so every wrong password (never cached) stalled every
    scrape for ~0.25 s. Now it runs in a worker thread; the answers are unchanged."""
    checked_in: list[threading.Thread] = []
    real_checkpw = bcrypt.checkpw

    def checkpw(password: bytes, hashed: bytes) -> bool:
        checked_in.append(threading.current_thread())
        return real_checkpw(password, hashed)

    monkeypatch.setattr(basicauth.bcrypt, "checkpw", checkpw)
    config = WebConfig("web.yml", basic_auth_users={"prom": bcrypt.hashpw(b"secret", bcrypt.gensalt(4))})
    app = web.Application(middlewares=[lweb.auth_middleware(config)])

    async def ok(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app.router.add_get("/metrics", ok)
    client = await aiohttp_client(app)

    def auth(password: str) -> dict:
        return {"Authorization": "Basic " + b64encode(f"prom:{password}".encode()).decode()}

    assert (await client.get("/metrics", headers=auth("wrong"))).status == 401
    assert (await client.get("/metrics", headers=auth("secret"))).status == 200
    assert (await client.get("/metrics", headers=auth("secret"))).status == 200  # cached: no third check
    assert len(checked_in) == 2
    assert threading.main_thread() not in checked_in


async def test_gzip_refused_with_q_zero_is_not_sent(aiohttp_client):
    """Before: any Accept-Encoding containing "gzip" got gzip, even ``gzip;q=0`` (RFC 9110 §12.5.3:
    "not acceptable"), so such a client received a body it had said it cannot decode."""
    info = Sample(fabric.IB_DEVICE_INFO, ("mlx5_0", "MT_0000000008", "16.35.1012", "MT4123"), 1.0)
    client = await aiohttp_client(create_app(ExporterConfig(), Scraper({}, [info])))
    cases = {"gzip": True, "deflate, gzip;q=0.5": True, "*": True, "GZIP": True,
             "gzip;q=0": False, "gzip; q=0.000, identity": False, "identity": False, "": False,
             "*;q=0": False, "br": False, "x-gzip": True, "*, gzip;q=0": False}
    for header, compressed in cases.items():
        response = await client.get("/metrics", headers={"Accept-Encoding": header}, auto_decompress=False)
        body = await response.read()
        assert (response.headers.get("Content-Encoding") == "gzip") is compressed, header
        text = gzip.decompress(body) if compressed else body
        assert b'lockstep_ib_device_info{device="mlx5_0"' in text, header
