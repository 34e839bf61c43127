"""``source_prom`` against an aiohttp server speaking the Prometheus HTTP API (``/api/v1/query_range``).

Turning a large job's matrix into a frame takes seconds of CPU; done on the event loop it would stall
``/metrics`` and the JSON API for as long, so it must run in a worker thread.
"""
from __future__ import annotations

import threading

import aiohttp
from aiohttp import web

from analytics import source_prom


def _prometheus() -> web.Application:
    async def query_range(request: web.Request) -> web.Response:
        start, step = float(request.query["start"]), float(request.query["step"])
        values = [[start + i * step, "NaN" if i == 1 else str(80.0 + i)] for i in range(4)]
        metric = {"__name__": "lockstep_gpu_sm_active_ratio", "node": "node00", "gpu": "0"}
        mine = request.query["query"].startswith(metric["__name__"] + " and on(node) ")
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
