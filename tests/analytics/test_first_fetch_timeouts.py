"""The service's first fetch and the post-mortem's against a store over real HTTP on 127.0.0.1 that
cannot answer large requests in time: a fake Prometheus that answers the inputs' range queries over a
simulated run as Prometheus would (``lockstep.analytics.evaluation.emulate``, tests/fixtures/analytics/
service.yaml: 32 GPUs for 600 s) and holds any answer of more than ``limit`` samples until the client
gives up. The service (``create_app``, a 1 s request timeout) gets the whole window scored without a
failed refresh and without asking twice for anything it had; the post-mortem gets the report a store
without a limit gives."""
from __future__ import annotations

import asyncio
import re
from collections import Counter

import numpy as np
import pytest
from aiohttp import web

from lockstep.analytics.evaluation import postmortem
from lockstep.analytics.evaluation.emulate import Answers
from lockstep.analytics.evaluation.evaluate import simulate
from lockstep.analytics.frame.inputs import INPUTS, MEMBER_ELSEWHERE, MEMBER_ON_NODES
from lockstep.analytics.prom.grid import Window
from lockstep.analytics.service.app import create_app
from lockstep.analytics.service.config import ServiceConfig
from lockstep.analytics.service.keys import REFRESHED, STATE
from tests.helpers.paths import FIXTURES

pytestmark = [pytest.mark.integration, pytest.mark.slow]   # each test waits out real request timeouts
SCENARIO = FIXTURES / "analytics/service.yaml"
JOB, HOLD_S = "7300", 30.0


@pytest.fixture(scope="module")
def run():
    return simulate(SCENARIO)


class SlowStore:
    """The fake store's state: the run by metric, the answer size it cannot serve in time, and what it
    answered (cell by cell: input, sample time, node) and held."""

    def __init__(self, run, limit: int) -> None:
        self.answers = Answers(run.frame)
        self.nodes = tuple(sorted(run.frame.loc[run.frame["job_id"].astype(str) == JOB, "node"].astype(str).unique()))
        self.limit, self.held, self.cells = limit, 0, []

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/api/v1/query", self.instant)
        app.router.add_post("/api/v1/query_range", self.query_range)
        return app

    async def instant(self, request: web.Request) -> web.Response:
        at = float(request.query["time"])
        return web.json_response({"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": {"job_id": JOB}, "value": [at, "32"]}]}})

    async def query_range(self, request: web.Request) -> web.Response:
        form = await request.post()
        window = Window(float(form["start"]), float(form["end"]), float(form["step"]))
        inp, nodes = self._parse(form["query"], window.step)
        block = self.answers.block(inp, window, JOB, nodes or None)
        if block.samples > self.limit:
            self.held += 1
            for _ in range(int(HOLD_S / 0.02)):        # until the client gives up (bounded)
                if request.transport is None or request.transport.is_closing():
                    break
                await asyncio.sleep(0.02)
            return web.json_response({"status": "error", "errorType": "timeout", "error": "held"}, status=503)
        if window.step == 5.0:           # not the sizing query (the job's GPUs at the window's two ends)
            asked = self.nodes if inp.per_job else [n for n in self.nodes if n not in nodes] if inp.except_nodes \
                else nodes
            self.cells += [(inp.name, float(t), n) for t in window.times() for n in asked]
        return web.json_response({"status": "success", "data": {"resultType": "matrix", "result": [
            {"metric": labels, "values": [[window.start + r * window.step, _number(v)] for r, v in
                                          zip(block.rows[block.series == s], block.values[block.series == s])]}
            for s, labels in enumerate(block.labels)]}})

    def _parse(self, query: str, step: float):
        found = re.search(r'node[=!]~"([^"]*)"', query)
        nodes = tuple(found.group(1).split("|")) if found else ()
        for inp in (*INPUTS, MEMBER_ON_NODES, MEMBER_ELSEWHERE):     # a window fetched whole: its GPUs by node
            if inp.promql(JOB, step, nodes) == query:
                return inp, nodes
        raise AssertionError(f"not an input's query: {query[:200]}")


def _number(v: float) -> str:
    return "NaN" if np.isnan(v) else repr(float(v))


def _twice(cells: list) -> list:
    return [cell for cell, n in Counter(cells).items() if n > 1]


async def _scored(run, url: str, aiohttp_client) -> tuple[dict, object, str]:
    """The service against ``url`` until it serves the job's whole window: its JSON, its state, its /metrics."""
    end = run.start + run.truth["duration_s"]
    # timeout_s: what a held answer costs; long enough that no answer served at once times out on a loaded
    # machine (at 1 s one did, once: a timeout the store did not cause)
    app = create_app(ServiceConfig(prometheus_url=url, interval_s=0.5, window_s=605.0, step_s=5.0, timeout_s=3.0,
                                   max_backoff_s=1.0, resume_lookback_s=0.0, now=lambda: end))
    client = await aiohttp_client(app)
    for _ in range(60):                          # bounded: each refresh gets some of the window
        app[REFRESHED].clear()
        await asyncio.wait_for(app[REFRESHED].wait(), 60)
        body = await (await client.get(f"/api/v1/jobs/{JOB}")).json()
        if body["status"] == "success" and body["data"]["coverage"] == 1.0:
            return body["data"], app[STATE], await (await client.get("/metrics")).text()
        assert body["status"] == "success" or "coverage" in body, body
    raise AssertionError("the job's window was never fetched whole")


async def test_the_service_scores_the_whole_window_through_timeouts_without_a_failed_refresh(run, aiohttp_server,
                                                                                           aiohttp_client):
    slow, fast = SlowStore(run, limit=1_500), SlowStore(run, limit=10**9)
    slow_url = str((await aiohttp_server(slow.app())).make_url("")).rstrip("/")
    fast_url = str((await aiohttp_server(fast.app())).make_url("")).rstrip("/")
    data, state, text = await _scored(run, slow_url, aiohttp_client)
    assert slow.held >= 2 and state.health.failures == 0 and state.fills.paces[JOB].timeouts == slow.held
    assert _twice(slow.cells) == []
    assert f'lockstep_analytics_job_window_coverage_ratio{{job_id="{JOB}"}} 1' in text.splitlines()
    assert [(g["node"], g["gpu"]) for g in data["stragglers"]] == [("node01", "3")]
    reference, _, _ = await _scored(run, fast_url, aiohttp_client)
    assert fast.held == 0 and data == reference


async def test_the_post_mortem_completes_through_timeouts_with_the_same_report(run, aiohttp_server):
    slow, fast = SlowStore(run, limit=1_500), SlowStore(run, limit=10**9)
    urls = [str((await aiohttp_server(s.app())).make_url("")).rstrip("/") for s in (slow, fast)]
    end = run.start + run.truth["duration_s"]
    # timeout_s as the service's test has it: at 1 s an answer served at once timed out on a loaded machine (CI), and
    # its cells, served but not read, were asked for again
    reports = [await postmortem.post_mortem(postmortem.PostMortem(url, run.start, end, job_id=JOB, timeout_s=3.0))
               for url in urls]
    assert slow.held >= 3 and fast.held == 0 and _twice(slow.cells) == []
    assert "errors" not in reports[0] and {**reports[0], "prometheus_url": ""} == {**reports[1], "prometheus_url": ""}
    assert [(s["node"], s["gpu"]) for s in reports[0]["stragglers"]] == [("node01", "3")]
