"""Answers from the store come uncompressed unless ``--prometheus-gzip`` asks for gzip: a real Prometheus
compresses every answer a client accepts compressed, at several times the CPU of the query (docs/deploy.md)."""
from __future__ import annotations

import argparse

import pytest
from aiohttp import web

from lockstep.analytics.evaluation import postmortem
from lockstep.analytics.prom.auth import PromAuth, add_flags, auth_from_args, parse_header
from lockstep.analytics.prom.session import open_session
from lockstep.stack import Stack, start_prometheus

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def prometheus(service_datadir):
    with Stack() as stack:
        yield stack.add(start_prometheus({"global": {"scrape_interval": "5s"}, "scrape_configs": []}, service_datadir))


@pytest.mark.parametrize("gzip, encoding", [(False, None), (True, "gzip")])
async def test_a_real_prometheus_answers_as_asked(prometheus, service_sim, gzip, encoding):
    end = service_sim.start + service_sim.truth["duration_s"]
    async with open_session(prometheus.url, PromAuth(gzip=gzip)) as session:
        async with session.post(f"{prometheus.url}/api/v1/query_range", data={
                "query": "lockstep_gpu_sm_active_ratio", "start": service_sim.start, "end": end, "step": 5}) as resp:
            body = await resp.json()
            assert resp.status == 200 and resp.headers.get("Content-Encoding") == encoding
    assert body["status"] == "success" and body["data"]["result"]


async def test_the_post_mortem_asks_as_told(aiohttp_server):
    asked = []

    async def answer(request: web.Request) -> web.Response:
        asked.append(request.headers.get("Accept-Encoding"))
        return web.json_response({"status": "success", "data": {"resultType": "vector", "result": []}})

    app = web.Application()
    app.router.add_route("*", "/api/v1/{path:.*}", answer)
    server = await aiohttp_server(app)
    for gzip in (False, True):
        rep = await postmortem.post_mortem(postmortem.PostMortem(str(server.make_url("")).rstrip("/"), 0.0, 3600.0,
                                                                 auth=PromAuth(gzip=gzip)))
        assert rep["jobs"] == []
    assert set(asked[:len(asked) // 2]) == {"identity"} and set(asked[len(asked) // 2:]) == {"gzip"}


def test_the_flag_and_not_a_header_asks_for_gzip():
    parser = argparse.ArgumentParser()
    add_flags(parser)
    assert auth_from_args(parser.parse_args(["--prometheus-url", "http://p:9090"])).gzip is False
    assert auth_from_args(parser.parse_args(["--prometheus-url", "http://p:9090", "--prometheus-gzip"])).gzip is True
    with pytest.raises(ValueError, match="--prometheus-gzip"):
        parse_header("Accept-Encoding: gzip")
