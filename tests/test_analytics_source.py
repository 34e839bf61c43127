"""``source_prom`` against an aiohttp server speaking the Prometheus HTTP API (``/api/v1/query_range``).

Turning a large job's matrix into a frame takes seconds of CPU; done on the event loop it would stall
``/metrics`` and the JSON API for as long, so it must run in a worker thread.
"""
from __future__ import annotations

import threading

import aiohttp
import pytest
from aiohttp import web

from analytics import source_prom


def _prometheus() -> web.Application:
    async def query_range(request: web.Request) -> web.Response:
        start, step = float(request.query["start"]), float(request.query["step"])
        values = [[start + i * step, "NaN" if i == 1 else str(80.0 + i)] for i in range(4)]
        metric = {"__name__": "lockstep_gpu_sm_active_ratio", "node": "node00", "gpu": "0"}
        mine = request.query["query"].startswith(metric["__name__"] + '{job="lockstep-node"} and on(node) ')
        result = [{"metric": metric, "values": values}] if mine else []
        return web.json_response({"status": "success", "data": {"resultType": "matrix", "result": result}})

    app = web.Application()
    app.router.add_get("/api/v1/query_range", query_range)
    return app


async def test_matrix_becomes_a_frame_off_the_event_loop(aiohttp_server, monkeypatch):
    server = await aiohttp_server(_prometheus())
    loop_thread, seen = threading.get_ident(), []
    convert = source_prom.matrix_to_frame

    def spy(result):
        seen.append(threading.get_ident())
        return convert(result)

    monkeypatch.setattr(source_prom, "matrix_to_frame", spy)
    async with aiohttp.ClientSession() as session:
        frame = await source_prom.fetch_job(session, str(server.make_url("/")), "4242",
                                            source_prom.Window(1000.0, 1015.0, 5.0), timeout=5.0)
    assert seen and loop_thread not in seen
    sm = frame[frame["metric"] == "lockstep_gpu_sm_active_ratio"].sort_values("timestamp")
    assert sm["timestamp"].tolist() == [1000.0, 1005.0, 1010.0, 1015.0]
    assert sm["value"].isna().tolist() == [False, True, False, False]    # NaN stays NaN: absent, not zero


async def test_a_large_answer_is_decoded_off_the_event_loop_and_a_malformed_one_is_an_error(aiohttp_server,
                                                                                          monkeypatch):
    big = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "m", "gpu": str(i)}, "values": [[1000.0, "1"]] * 50} for i in range(800)]}}
    answers = {"/big": lambda: web.json_response(big), "/list": lambda: web.json_response([1, 2]),
               "/truncated": lambda: web.Response(text='{"status": "succ')}

    async def handler(request: web.Request) -> web.Response:
        return answers[request.path]()

    app = web.Application()
    for path in answers:
        app.router.add_get(path, handler)
    server = await aiohttp_server(app)
    loop_thread, seen = threading.get_ident(), []
    loads = source_prom.json.loads

    def spy(body):
        seen.append(threading.get_ident())
        return loads(body)

    monkeypatch.setattr(source_prom.json, "loads", spy)
    async with aiohttp.ClientSession() as session:
        result = await source_prom.api_get(session, str(server.make_url("/")), "/big", {}, timeout=5.0)
        assert len(result) == 800 and seen and loop_thread not in seen
        for path in ("list", "truncated"):
            with pytest.raises(source_prom.PrometheusError, match=f"/{path}: ValueError|/{path}: JSONDecodeError"):
                await source_prom.api_get(session, str(server.make_url("/")), "/" + path, {}, timeout=5.0)
