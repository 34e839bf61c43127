"""The analytics service against a REAL Prometheus filled from the simulator (promtool backfill).

Expectations come from the simulator's truth (which GPU is throttled, the loss per cause), and the
scenario file; a crafted job id is planted in Prometheus next to the real job.
"""
from __future__ import annotations

import asyncio
import dataclasses
import re
import shutil
import subprocess
from urllib.parse import quote as urlquote

import numpy as np
import pytest

from lockstep.analytics.evaluation.simframe import build_features
from lockstep.analytics.prom import api as source_prom
from lockstep.analytics.prom import promql
from lockstep.analytics.scoring.score import score_features
from lockstep.analytics.service.app import create_app
from lockstep.analytics.service.fetch import fetch_window
from lockstep.analytics.service.keys import STATE
from lockstep.analytics.service.source import PrometheusSource
from lockstep.stack import Stack, query, require_binary, start_prometheus
from tests.helpers.analytics_service import EVIL, PROM_CONFIG, assert_the_whole_run_accounted, next_refresh, service_config

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def prometheus(service_datadir):
    """Shared by the tests that only read; start_prometheus keeps 400 days (the series lie in 2026-01)."""
    with Stack() as stack:
        yield stack.add(start_prometheus(PROM_CONFIG, service_datadir))


@pytest.fixture
def own_prometheus(service_datadir, tmp_path, stack):
    """A Prometheus this test may stop: its own copy of the blocks."""
    shutil.copytree(service_datadir / "data", tmp_path / "data")
    return stack.add(start_prometheus(PROM_CONFIG, tmp_path))


def _samples(text: str, name: str) -> dict[str, float]:
    return {m.group(1): float(m.group(2)) for m in re.finditer(rf"^{name}(\{{.*?\}})? (\S+)$", text, re.M)}


async def test_scores_from_real_prometheus_match_truth(prometheus, service_sim, aiohttp_client):
    app = create_app(service_config(prometheus.url, service_sim))
    client = await aiohttp_client(app)
    await next_refresh(app)
    text = await (await client.get("/metrics")).text()
    assert _samples(text, "lockstep_analytics_up") == {None: 1.0}
    flagged = {k for k, v in _samples(text, "lockstep_straggler_flagged").items() if v == 1}
    (s,) = service_sim.truth["stragglers"]
    assert flagged == {f'{{job_id="7300",node="{s["node"]}",gpu="{s["gpu"]}"}}'}
    lost = _samples(text, "lockstep_job_lost_gpu_seconds_total")
    for cause, want in service_sim.truth["loss"]["lost_gpu_seconds"].items():
        got = lost[f'{{job_id="7300",cause="{cause}"}}']
        assert abs(got - want) <= max(0.1 * want, 0.002 * service_sim.truth["loss"]["allocated_gpu_seconds"]), cause
    body = await (await client.get("/api/v1/jobs/7300")).json()
    assert body["status"] == "success" and body["stale"] is False
    assert [(g["node"], g["gpu"]) for g in body["data"]["stragglers"]] == [(s["node"], s["gpu"])]
    # The flag's evidence: the scenario slows the GPU's clock to 0.7, so its clock and its compute
    # activity against the peers agree; the job's GPUs are identical otherwise: no imbalance.
    (evidence,) = [g["evidence"] for g in body["data"]["stragglers"]]
    assert {"clock", "work"} <= set(evidence["signals"]) and evidence["votes"] >= 2
    assert evidence["signals"]["clock"]["change"] == pytest.approx(1 / 0.7, rel=0.03)
    assert body["data"]["imbalance"] == {"ranks": [], "basis": "compute_activity", "lost_share": 0.0,
                                         "cost_basis": "step_seconds", "lost_gpu_seconds": 0.0, "cause": "work"}
    assert _samples(text, "lockstep_job_imbalance_lost_gpu_seconds_total") == {'{job_id="7300"}': 0.0}


async def test_malicious_job_id_is_never_queried_and_rejected_by_the_api(prometheus, service_sim, aiohttp_client):
    # The crafted id is really in Prometheus, and quote() matches exactly it and nothing else.
    seen = query(prometheus.url, "count by (job_id) (lockstep_gpu_job_info)", service_sim.start + 300)
    assert {r["metric"]["job_id"] for r in seen} == {"7300", EVIL}
    exact = query(prometheus.url, f"lockstep_gpu_job_info{{job_id={promql.quote(EVIL)}}}",
                  service_sim.start + 300)
    assert {r["metric"]["job_id"] for r in exact} == {EVIL} and len(exact) == 1
    with pytest.raises(promql.InvalidJobId):
        promql.job_selector(EVIL)
    app = create_app(service_config(prometheus.url, service_sim))
    client = await aiohttp_client(app)
    await next_refresh(app)
    jobs = await (await client.get("/api/v1/jobs")).json()
    assert [j["job_id"] for j in jobs["data"]] == ["7300"]
    text = await (await client.get("/metrics")).text()
    assert _samples(text, "lockstep_analytics_rejected_job_ids") == {None: 1.0}
    resp = await client.get("/api/v1/jobs/" + urlquote(EVIL, safe=""))
    assert resp.status == 400 and (await resp.json())["errorType"] == "bad_data"
    assert (await client.get("/api/v1/jobs/4242")).status == 404


async def test_prometheus_stopped_mid_run_serves_stale_results(own_prometheus, service_sim, aiohttp_client):
    prometheus = own_prometheus
    app = create_app(service_config(prometheus.url, service_sim))
    client = await aiohttp_client(app)
    await next_refresh(app)
    before = await (await client.get("/metrics")).text()
    failures = app[STATE].health.failures
    prometheus.stop()
    # a refresh already under way when Prometheus stopped may still succeed: wait for two failures
    deadline = asyncio.get_running_loop().time() + 30
    while app[STATE].health.failures < failures + 2:
        assert asyncio.get_running_loop().time() < deadline, "refreshes never failed after Prometheus stopped"
        await next_refresh(app)
    after = await (await client.get("/metrics")).text()
    assert _samples(after, "lockstep_analytics_up") == {None: 0.0}
    assert _samples(after, "lockstep_analytics_results_stale") == {None: 1.0}
    assert _samples(after, "lockstep_analytics_refresh_failures_total")[None] >= 2
    assert _samples(after, "lockstep_straggler_flagged") == _samples(before, "lockstep_straggler_flagged")
    assert _samples(after, "lockstep_analytics_last_success_timestamp_seconds") == \
        _samples(before, "lockstep_analytics_last_success_timestamp_seconds")
    body = await (await client.get("/api/v1/jobs/7300")).json()
    assert body["stale"] is True and body["up"] is False and body["last_error"]
    assert [(g["node"], g["gpu"]) for g in body["data"]["stragglers"]] == [("node01", "3")]


async def test_time_missed_while_prometheus_was_unreachable_is_caught_up(prometheus, service_sim, aiohttp_client):
    """A refresh 2 min into the run, the next one (Prometheus unreachable in between) at its end, with a
    2 min window: the 6 min between them are accounted chunk by chunk, and the loss account of the whole
    run matches the truth as when one window covers it."""
    start, end = service_sim.start, service_sim.start + service_sim.truth["duration_s"]
    clock = [start + 120]
    app = create_app(dataclasses.replace(service_config(prometheus.url, service_sim), window_s=125, now=lambda: clock[0]))
    await aiohttp_client(app)
    await next_refresh(app)
    gpus = service_sim.truth["loss"]["allocated_gpu_seconds"] / service_sim.truth["duration_s"]
    assert app[STATE].losses["7300"].allocated == pytest.approx(120 * gpus)
    clock[0] = end
    for _ in range(4):   # three chunks of the gap, then the current window
        await next_refresh(app)
    assert_the_whole_run_accounted(app[STATE].losses["7300"], service_sim, end)


def _as_scraped(exposition: str, at: float) -> str:
    """The per-job series of an exposition as Prometheus stores them after a scrape at ``at``
    (OpenMetrics with the target labels), for ``promtool tsdb create-blocks-from openmetrics``."""
    out = []
    for line in exposition.splitlines():
        name, sep, rest = line.partition("{")
        if sep and name.startswith("lockstep_job_"):
            out.append(f'{name}{{job="lockstep-analytics",instance="replica-a:9842",{rest} {at:.3f}')
    return "\n".join(out) + "\n# EOF\n"


async def _scraped_replica(prometheus, service_datadir, service_sim, tmp_path, stack, aiohttp_client, window_s: float,
                           now: float):
    """Replica A (``window_s``, its clock at ``now``) after one refresh, and a Prometheus holding the run and A's
    per-job series as one scrape 5 s later stored them."""
    a = create_app(dataclasses.replace(service_config(prometheus.url, service_sim), window_s=window_s, now=lambda: now))
    client = await aiohttp_client(a)
    await next_refresh(a)
    scraped = tmp_path / "scraped.om"
    scraped.write_text(_as_scraped(await (await client.get("/metrics")).text(), now + 5))
    shutil.copytree(service_datadir / "data", tmp_path / "data")
    promtool = subprocess.run([require_binary("promtool"), "tsdb", "create-blocks-from", "openmetrics",
                               str(scraped), str(tmp_path / "data")], capture_output=True, text=True)
    assert promtool.returncode == 0, promtool.stderr
    return a, stack.add(start_prometheus(PROM_CONFIG, tmp_path))


async def test_a_restarted_replica_continues_the_counters_prometheus_scraped_from_it(
        prometheus, service_datadir, service_sim, tmp_path, stack, aiohttp_client):
    """Replica A accounts the first 2 min and is scraped; replica B starts at the end of the run. B
    continues A's counters (a fresh counter would recount its first window on top of A's) and
    catches up the time in between: the account of the whole run matches the truth."""
    start, end = service_sim.start, service_sim.start + service_sim.truth["duration_s"]
    a, store = await _scraped_replica(prometheus, service_datadir, service_sim, tmp_path, stack, aiohttp_client, 125,
                                      start + 120)

    b = create_app(dataclasses.replace(service_config(store.url, service_sim), window_s=125, now=lambda: end))
    await aiohttp_client(b)
    await next_refresh(b)
    resumed, first = a[STATE].losses["7300"], b[STATE].losses["7300"]
    gpus = service_sim.truth["loss"]["allocated_gpu_seconds"] / service_sim.truth["duration_s"]
    assert start + 120 < first.accounted_until < end   # continued from A's counters, still catching up
    assert first.allocated == pytest.approx(resumed.allocated + (first.accounted_until - start - 120) * gpus)
    for _ in range(3):
        await next_refresh(b)
    assert_the_whole_run_accounted(b[STATE].losses["7300"], service_sim, end)


async def test_a_restarted_replica_continues_the_checkpoint_counters(
        prometheus, service_datadir, service_sim, tmp_path, stack, aiohttp_client):
    """Replica A scores the first 5 minutes (the run's first checkpoint ended in them) and is scraped; replica B
    takes over at the end of the run, its 5-minute window holding the second checkpoint only. B continues A's
    checkpoint counters: the series the monthly review reads go on counting both (a fresh counter would say 1
    after A's 1: no increase, the second checkpoint lost); and a window over A's checkpoint counts it once."""
    start, (first, second) = service_sim.start, service_sim.truth["checkpoints"]
    assert first["start_s"] + first["duration_s"] < 300 <= second["start_s"]
    a, store = await _scraped_replica(prometheus, service_datadir, service_sim, tmp_path, stack, aiohttp_client, 300,
                                      start + 300)
    counted = a[STATE].losses["7300"]
    assert counted.checkpoints == 1 and counted.last_checkpoint["mount"] == first["mount"]
    assert abs(counted.last_checkpoint["start_timestamp"] - (start + first["start_s"])) <= service_sim.period

    async def replica_b(now: float):
        b = create_app(dataclasses.replace(service_config(store.url, service_sim), window_s=300, now=lambda: now))
        served = await aiohttp_client(b)
        await next_refresh(b)
        return b[STATE].losses["7300"], _samples(await (await served.get("/metrics")).text(),
                                                 "lockstep_job_checkpoints_total")

    later, served = await replica_b(start + service_sim.truth["duration_s"])
    assert later.checkpoints == 2 and list(served.values()) == [2.0]
    assert abs(later.last_checkpoint["start_timestamp"] - (start + second["start_s"])) <= service_sim.period
    assert later.checkpoint_bytes == pytest.approx(2 * counted.checkpoint_bytes, rel=0.1)
    overlapping, _ = await replica_b(start + 400)   # its window holds A's checkpoint again
    assert (overlapping.checkpoints, overlapping.last_checkpoint) == (1, counted.last_checkpoint)


async def test_parity_prometheus_path_equals_direct_path(prometheus, service_sim):
    """Same scenario, same scorer: the inputs' answers from Prometheus' query_range, and the same
    answers computed from the simulator's frame, give the same matrices bit for bit, and so the same
    scores."""
    import aiohttp

    end = service_sim.start + service_sim.truth["duration_s"]
    window = source_prom.Window(service_sim.start, end, service_sim.period)
    async with aiohttp.ClientSession() as session:
        held = await fetch_window(PrometheusSource(session, prometheus.url, 10.0), "7300", window)
    prom_features, direct_features = held.features(), build_features(service_sim.frame)
    assert sorted(prom_features.signals) == sorted(direct_features.signals)
    for name, matrix in prom_features.signals.items():
        assert matrix.dtype == np.float32
        np.testing.assert_array_equal(matrix, direct_features.signals[name], err_msg=name)
    via_prom = score_features(prom_features, service_sim.start, service_sim.period)["7300"]
    direct = score_features(direct_features, service_sim.start, service_sim.period)["7300"]
    assert list(via_prom.columns) == list(direct.columns)
    np.testing.assert_allclose(via_prom.stragglers.scores, direct.stragglers.scores, atol=1e-9)
    assert (via_prom.stragglers.flagged == direct.stragglers.flagged).all()
    assert list(via_prom.causes) == list(direct.causes)
    assert via_prom.loss == direct.loss


async def test_slow_prometheus_times_out_and_is_reported(prometheus, service_sim, aiohttp_client):
    app = create_app(dataclasses.replace(service_config(prometheus.url, service_sim), timeout_s=1e-4))
    client = await aiohttp_client(app)
    await next_refresh(app)
    text = await (await client.get("/metrics")).text()
    assert _samples(text, "lockstep_analytics_up") == {None: 0.0}
    assert "TimeoutError" in app[STATE].health.last_error


async def test_metrics_exposition_golden(prometheus, service_sim, aiohttp_client, golden):
    """The served families, names and label sets (reviewed file; values from the scored scenario)."""
    app = create_app(service_config(prometheus.url, service_sim))
    client = await aiohttp_client(app)
    await next_refresh(app)
    text = await (await client.get("/metrics")).text()
    text = re.sub(r"^(lockstep_analytics_(last_success_timestamp_seconds|refresh_duration_seconds)) .*$",
                  r"\1 <time>", text, flags=re.M)
    # the first refresh fetches the window whole, the next ones only its last step again
    text = re.sub(r"^(lockstep_analytics_refresh_(samples|full_fetches)) .*$", r"\1 <fetched>", text, flags=re.M)
    golden("analytics/metrics.prom", text)


def _proxy_with_a_failing_job(upstream: str):
    """The real Prometheus, except that it also lists job 9999 and refuses every range query of it
    (as Prometheus does when a job's query would load too many samples)."""
    import aiohttp
    from aiohttp import web

    async def forward(request: web.Request, form: dict | None = None) -> dict:
        async with aiohttp.ClientSession() as session:
            call = session.post(upstream + request.path, data=form) if form is not None else \
                session.get(upstream + request.path, params=request.query)
            async with call as resp:
                return await resp.json()

    async def instant(request: web.Request) -> web.Response:
        body = await forward(request)
        body["data"]["result"].append({"metric": {"job_id": "9999"}, "value": [float(request.query["time"]), "8"]})
        return web.json_response(body)

    async def query_range(request: web.Request) -> web.Response:
        form = dict(await request.post())
        if 'job_id="9999"' in form["query"]:
            return web.json_response({"status": "error", "errorType": "execution",
                                      "error": "query processing would load too many samples into memory"},
                                     status=422)
        return web.json_response(await forward(request, form))

    app = web.Application()
    app.router.add_get("/api/v1/query", instant)
    app.router.add_post("/api/v1/query_range", query_range)
    return app


async def test_one_job_failing_to_fetch_does_not_stale_the_others(prometheus, service_sim, aiohttp_server, aiohttp_client):
    proxy = await aiohttp_server(_proxy_with_a_failing_job(prometheus.url))
    app = create_app(service_config(str(proxy.make_url("")).rstrip("/"), service_sim))
    client = await aiohttp_client(app)
    await next_refresh(app)
    text = await (await client.get("/metrics")).text()
    assert _samples(text, "lockstep_analytics_up") == {None: 1.0}
    jobs = await (await client.get("/api/v1/jobs")).json()
    assert jobs["stale"] is False and [j["job_id"] for j in jobs["data"]] == ["7300"]
    assert "9999" in app[STATE].health.last_error and "too many samples" in app[STATE].health.last_error
