"""``lockstep analytics serve`` (a real process) against a Prometheus, or a proxy in front of one, whose
answer to one job's queries is a small gzip body inflating to gigabytes of valid JSON: the service
stops reading at its ``--prometheus-max-answer-size``, stays within its memory limit, fails that job
with an error naming the query, counts it in its metrics, and still scores the other job. Plus the
report's client, and the cap read while the body comes in."""
from __future__ import annotations

import asyncio
import gzip
import json

import aiohttp
import pytest
from aiohttp import web

from lockstep.analytics.prom.answersize import SERVE_DEFAULT, describe, parse_size, read_answer
from lockstep.analytics.prom.errors import AnswerTooLarge
from lockstep.exporters.catalog import fabric, gpu, storage
from tests.helpers.stalled import Process

MEMORY_LIMIT_KB = 1536 * 1024     # the chart's memory limit for the analytics service (the unit's MemoryMax is 2G)
PADDING = 8 << 20                 # bytes of whitespace per gzip member
HOSTILE = "4242"                  # the job whose answers are padded
GOOD = "4343"


def padded_gzip(document: dict, padding: int):
    """``document`` as JSON with ``padding`` bytes of whitespace inside it, gzip-compressed as a series of
    members (each a few KB): the chunks to send, computed once per member."""
    text = json.dumps(document)
    head, tail = text[:-2], text[-2:]          # pad inside the outer object, before its last brackets
    member = gzip.compress(b" " * PADDING)
    yield gzip.compress(head.encode())
    for _ in range(padding // PADDING):
        yield member
    yield gzip.compress(tail.encode())


def matrix(series: list[dict], form) -> dict:
    start, end, step = float(form["start"]), float(form["end"]), float(form["step"])
    times = [start + i * step for i in range(int(round((end - start) / step)) + 1)]
    return {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": labels, "values": [[t, "0.5"] for t in times]} for labels in series]}}


def prometheus_app(padding: int) -> web.Application:
    """Two jobs on ``lockstep_gpu_job_info``; GOOD's inputs answer two GPUs of node n1, HOSTILE's are
    valid empty answers padded to ``padding`` bytes, sent gzip-compressed."""
    async def instant(request: web.Request) -> web.Response:
        query = request.query.get("query", "")
        jobs = [] if "last_over_time({__name__" in query else [HOSTILE, GOOD]   # the resumed counters: none
        return web.json_response({"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": {"job_id": j}, "value": [float(request.query["time"]), "8"]} for j in jobs]}})

    async def query_range(request: web.Request) -> web.StreamResponse:
        form = await request.post()
        query = form["query"]
        if HOSTILE in query:
            response = web.StreamResponse(headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
            await response.prepare(request)
            empty = {"status": "success", "data": {"resultType": "matrix", "result": []}}
            try:
                for chunk in padded_gzip(empty, padding):
                    await response.write(chunk)
                await response.write_eof()
            except (ConnectionError, asyncio.CancelledError):
                pass   # the service hung up
            return response
        if query.startswith(("max by (", "sum by (", "group by (")):
            by = query.split(" by (", 1)[1].split(")", 1)[0].split(", ")
            if query.startswith("group") and by != ["node", "gpu", "pod"]:
                return web.json_response(matrix([], form))   # clock-event reasons, link trouble: none
        else:   # an input asked for as stored (Input.as_stored): its metric says its series
            name = query.split("{", 1)[0].rsplit("(", 1)[-1]
            if name in (gpu.CLOCK_EVENT.name, gpu.PCIE_LINK_DEGRADED.name):
                return web.json_response(matrix([], form))   # none
            by = ["node", "gpu", "pod"] if name == gpu.JOB_INFO.name else ["node", "device"] if name in (
                fabric.IB_TRANSMIT_BYTES.name, fabric.IB_TRANSMIT_WAIT.name) else ["node"] if name in (
                storage.JOB_IO_PRESSURE.name,) else ["node", "gpu"]
        series = {("node", "gpu", "pod"): [{"node": "n1", "gpu": g} for g in "01"],
                  ("node", "gpu"): [{"node": "n1", "gpu": g} for g in "01"],
                  ("node", "device"): [{"node": "n1", "device": "mlx5_0"}],
                  ("node",): [{"node": "n1"}]}[tuple(by)]
        return web.json_response(matrix(series, form))

    app = web.Application()
    app.router.add_get("/api/v1/query", instant)
    app.router.add_post("/api/v1/query_range", query_range)
    return app


@pytest.mark.integration
async def test_a_gzip_answer_inflating_to_gigabytes_fails_its_job_only_and_is_reported(aiohttp_server, tmp_path):
    """Before: the service read the whole answer (a 0.4 MB gzip body of 256-384 MiB took it past 1.2 GB)
    and took a padded answer for good data."""
    prometheus = await aiohttp_server(prometheus_app(2 << 30))
    service = await asyncio.to_thread(Process, [
        "analytics", "serve", f"--prometheus-url=http://127.0.0.1:{prometheus.port}", "--interval=5", "--window=60",
        "--step=5", "--resume-lookback=0"], tmp_path / "analytics.log")
    try:
        async with aiohttp.ClientSession(f"http://127.0.0.1:{service.port}") as client:
            deadline = asyncio.get_running_loop().time() + 120
            while True:
                jobs = await (await client.get("/api/v1/jobs")).json()
                metrics = await (await client.get("/metrics")).text()
                if "lockstep_analytics_prometheus_answers_too_large_total 0" not in metrics and \
                        GOOD in [j["job_id"] for j in jobs["data"]]:
                    break
                assert asyncio.get_running_loop().time() < deadline, f"{jobs}\n{service.text()[-2000:]}"
                await asyncio.sleep(0.5)
        peak_kb = service.status("VmHWM")
    finally:
        await asyncio.to_thread(service.stop)
    assert peak_kb < MEMORY_LIMIT_KB, f"peak RSS {peak_kb // 1024} MiB"
    error = jobs["last_error"]
    assert f"job {HOSTILE}:" in error
    assert "query 'lockstep_gpu_job_info{" in error      # the job's membership, asked for as stored
    assert f"larger than {describe(SERVE_DEFAULT)} (--prometheus-max-answer-size)" in error
    assert [j["job_id"] for j in jobs["data"]] == [GOOD] and jobs["stale"] is False


async def test_the_cap_counts_decompressed_bytes_as_they_come_in(aiohttp_server):
    """A body announced small (its gzip) inflating past the cap, one announced past it (refused before
    reading), and one just under it (read whole)."""
    async def padded(request: web.Request) -> web.Response:
        size = int(request.query["size"])
        if request.query.get("gzip"):
            return web.Response(body=b"".join(padded_gzip({"a": 1}, size)),
                                headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})
        return web.Response(body=b"{" + b" " * size + b"}", content_type="application/json")

    app = web.Application()
    app.router.add_get("/", padded)
    server = await aiohttp_server(app)
    cap = 3 * PADDING
    async with aiohttp.ClientSession() as session:
        async def read(**query) -> bytes:
            async with session.get(server.make_url("/"), params={k: str(v) for k, v in query.items()}) as resp:
                return await read_answer(resp, cap)

        with pytest.raises(AnswerTooLarge, match="larger than 24 MiB"):
            await read(size=4 * PADDING, gzip=1)
        with pytest.raises(AnswerTooLarge, match=f"announces {4 * PADDING + 2} bytes"):
            await read(size=4 * PADDING)
        assert len(await read(size=cap - 2)) == cap
        assert json.loads(await read(size=2 * PADDING, gzip=1)) == {"a": 1}


def test_sizes_are_read_as_operators_write_them():
    assert (parse_size("128MiB"), parse_size("1GiB"), parse_size("500MB"), parse_size("4096")) == (
        128 << 20, 1 << 30, 500_000_000, 4096)
    for bad in ("", "0", "-1MiB", "12 parsecs", "1e9"):
        with pytest.raises(ValueError, match="--prometheus-max-answer-size"):
            parse_size(bad)


@pytest.mark.integration
def test_report_monthly_stops_at_its_cap_and_names_the_query(tmp_path):
    """The report's client (its own event loop, the same reading): ``lockstep report monthly`` exits 1
    naming the query whose answer passed ``--prometheus-max-answer-size``."""
    import subprocess
    import sys

    body = b"".join(padded_gzip({"status": "success", "data": {"resultType": "matrix", "result": []}}, 4 * PADDING))
    server = _serve_gzip(body)
    try:
        done = subprocess.run([sys.executable, "-m", "lockstep", "report", "monthly",
                               f"--prometheus-url=http://127.0.0.1:{server.server_address[1]}", "--month=2026-01",
                               f"--out={tmp_path / 'report'}", "--prometheus-max-answer-size=16MiB"],
                              capture_output=True, text=True, timeout=120)
    finally:
        server.shutdown()
    assert done.returncode == 1, done.stderr
    assert "query '" in done.stderr and "larger than 16 MiB (--prometheus-max-answer-size)" in done.stderr


def _serve_gzip(body: bytes):
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except ConnectionError:
                pass

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # a short poll: shutdown() waits for the serving loop to look (half a second by default)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    return server
