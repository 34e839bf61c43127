"""The power exporter against broken and hostile BMCs and callers, each on a real local HTTP server:
an oversized body, redirects (off-origin, loops), many concurrent /probe calls on one BMC, a
caller's scrape-timeout header of 0, values of the wrong JSON type, and a BMC that stalls after the
headers or trickles its body."""
from __future__ import annotations

import asyncio
import hashlib
import json
import shutil

import aiohttp
import pytest
from aiohttp import web

from lockstep.exporters.power.app import POLLER, AppOptions, create_app
from lockstep.exporters.power.config import load_config
from lockstep.exporters.power.poller import Poller
from lockstep.exporters.power.pollreport import shortened
from lockstep.exporters.power.redfish import MAX_BODY_BYTES, PER_TARGET_REQUESTS, HttpRedfish
from tests.helpers.paths import FIXTURES
from tests.helpers.power import parse, target, value, write_config
from tests.helpers.redfish_mockup import MockupService

SERVER = FIXTURES / "redfish/public-rackmount1"
ROOT = "/redfish/v1/"


async def serve(aiohttp_server, handler) -> str:
    app = web.Application()
    app.router.add_get("/{tail:.*}", handler)
    return str((await aiohttp_server(app)).make_url("")).rstrip("/")


async def poll_one(url: str, tmp_path, timeout_s: float = 5.0):
    config = load_config(write_config(tmp_path, url, [target("bmc1", "bmc", url)], timeout_s=timeout_s))
    async with aiohttp.ClientSession() as session:
        return await Poller(config, HttpRedfish(session, retries=0)).poll(config.targets[0])


async def test_an_oversized_body_fails_the_poll_and_is_not_read_to_the_end(aiohttp_server, tmp_path):
    """Before: a BMC answering 200 MiB of JSON was read whole (+600 MiB RSS) and counted as a good poll.
    Here a valid JSON object padded past the limit, streamed without Content-Length, and one that
    announces its length. What the server got into the socket is no measure of what the exporter read (loopback
    buffers hold megabytes while a busy exporter has not read yet): the refusal's own words say where it came
    from, and the padding is far more than the buffers can hold."""
    sent = {"chunked": 0, "announced": 0}
    chunk = b" " * 65536
    padded = 16 * MAX_BODY_BYTES

    async def huge(request: web.Request) -> web.StreamResponse:
        kind = "announced" if "announced" in request.path else "chunked"
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        if kind == "announced":
            response.content_length = padded + 2
        await response.prepare(request)
        try:
            await response.write(b"{")
            while sent[kind] < padded:
                await response.write(chunk)
                sent[kind] += len(chunk)
            await response.write(b"}")
        except (ConnectionError, asyncio.CancelledError):
            pass  # the exporter hung up: what was sent so far is the measure
        return response

    url = await serve(aiohttp_server, huge)
    chunked = await poll_one(url, tmp_path)
    announced = await poll_one(url + "/announced", tmp_path)
    assert not chunked.up and f"body exceeds the {MAX_BODY_BYTES}-byte limit" in chunked.error, chunked.error
    # refused from the header, before the body
    assert not announced.up and f"body of {padded + 2} bytes exceeds" in announced.error, announced.error
    assert sent["chunked"] < padded and sent["announced"] < padded


async def test_redirects_stay_on_the_bmc_and_a_loop_is_named(aiohttp_server, tmp_path):
    """Before: aiohttp followed a redirect to any host, credentials and all (a blind SSRF for whoever
    controls the BMC), and a redirect loop was reported as "HTTP 0"."""
    elsewhere: list[str] = []

    async def other(request: web.Request) -> web.Response:
        elsewhere.append(request.headers.get("Authorization", ""))
        return web.json_response({})

    other_url = await serve(aiohttp_server, other)
    svc = MockupService()
    svc.add("moved", SERVER)

    async def redirecting(request: web.Request) -> web.StreamResponse:
        if request.path.startswith("/away"):
            raise web.HTTPFound(other_url + ROOT)
        if request.path.startswith("/loop"):
            raise web.HTTPFound(request.path)
        if request.path == "/moved/redfish/v1/":
            raise web.HTTPMovedPermanently("/moved/redfish/v1")  # same origin: followed
        return await svc.handle(request)

    url = await serve(aiohttp_server, redirecting)
    away = await poll_one(url + "/away", tmp_path)
    loop = await poll_one(url + "/loop", tmp_path)
    moved = await poll_one(url + "/moved", tmp_path)
    assert not away.up and "another origin" in away.error, away.error
    assert elsewhere == []
    assert not loop.up and "redirect loop" in loop.error, loop.error
    assert moved.up, moved.error


@pytest.mark.slow
async def test_concurrent_probes_share_one_request_limit_per_bmc(aiohttp_server, aiohttp_client, tmp_path):
    """Before: the per-BMC limit was made per poll, so 40 concurrent /probe calls put 40 requests in
    flight on one BMC (embedded web servers answer 503 or fall over)."""
    svc = MockupService()
    device = svc.add("", SERVER, latency_s=0.05)
    url = str((await aiohttp_server(svc.app())).make_url("")).rstrip("/")
    config = load_config(write_config(tmp_path, url, [target("bmc1", "bmc", url)], timeout_s=30))
    client = await aiohttp_client(create_app(config, AppOptions(background=False)))
    answers = await asyncio.gather(*(client.get("/probe", params={"target": "bmc1"},
                                                headers={"X-Prometheus-Scrape-Timeout-Seconds": "60"})
                                     for _ in range(40)))
    assert all(a.status == 200 for a in answers)
    assert 1 < device.max_in_flight <= PER_TARGET_REQUESTS


async def test_a_scrape_timeout_header_of_zero_cannot_force_a_failed_poll(aiohttp_server, aiohttp_client, tmp_path):
    """Before: ``X-Prometheus-Scrape-Timeout-Seconds: 0`` gave the probe a 0.1 s budget, so any caller
    could make a BMC answering in 0.3 s read as down."""
    svc = MockupService()
    svc.add("", SERVER, latency_s=0.3)
    url = str((await aiohttp_server(svc.app())).make_url("")).rstrip("/")
    config = load_config(write_config(tmp_path, url, [target("bmc1", "bmc", url)], timeout_s=20))
    client = await aiohttp_client(create_app(config, AppOptions(background=False)))
    for header in ("0", "-5", "nan", "inf"):
        response = await client.get("/probe", params={"target": "bmc1"},
                                    headers={"X-Prometheus-Scrape-Timeout-Seconds": header})
        assert value(parse(await response.text()), "lockstep_redfish_up", target="bmc1") == 1, header


def _edit(path, change) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


async def test_a_value_of_the_wrong_json_type_loses_only_that_reading(aiohttp_server, aiohttp_client, tmp_path):
    """Before: ``"Status": "OK"`` (AttributeError), a non-string ``@odata.id`` (AttributeError) and a
    non-list ``Members`` (TypeError) each took the whole target down."""
    mockup = tmp_path / "mockup"
    shutil.copytree(SERVER, mockup)
    supplies = mockup / "Chassis/1U/PowerSubsystem/PowerSupplies"
    _edit(supplies / "Bay1/index.json", lambda d: d.update(Status="OK"))
    _edit(supplies / "index.json", lambda d: d["Members"][1].update({"@odata.id": 42}))
    _edit(mockup / "Systems/index.json", lambda d: d.update(Members=5))
    svc = MockupService()
    svc.add("", mockup)
    url = str((await aiohttp_server(svc.app())).make_url("")).rstrip("/")
    config = load_config(write_config(tmp_path, url, [target("bmc1", "bmc", url)], timeout_s=5))
    client = await aiohttp_client(create_app(config, AppOptions(background=False)))
    await client.app[POLLER].poll_all()
    values = parse(await (await client.get("/metrics")).text())
    env = json.loads((SERVER / "Chassis/1U/EnvironmentMetrics/index.json").read_text())
    metrics = json.loads((SERVER / "Chassis/1U/PowerSubsystem/PowerSupplies/Bay1/Metrics/index.json").read_text())
    assert value(values, "lockstep_redfish_up", target="bmc1") == 1, client.app[POLLER].results["bmc1"].error
    assert value(values, "lockstep_chassis_power_watts", target="bmc1") == env["PowerWatts"]["Reading"]
    assert value(values, "lockstep_psu_input_power_watts", target="bmc1", chassis="1U", psu="Bay1") == \
        metrics["InputPowerWatts"]["Reading"]


async def test_label_values_past_the_limit_are_served_shortened_and_counted(aiohttp_server, aiohttp_client, tmp_path,
                                                                            caplog):
    """Before: a PSU Id of any length (a megabyte, within the body limit) was served as a label of
    every scrape and stored in Prometheus' index. Now it is shortened to 128 characters, and the target
    keeps every reading."""
    mockup = tmp_path / "mockup"
    shutil.copytree(SERVER, mockup)
    supplies = mockup / "Chassis/1U/PowerSubsystem/PowerSupplies"
    long1 = "B" * 100_000
    _edit(supplies / "Bay1/index.json", lambda d: d.update(Id=long1))
    svc = MockupService()
    svc.add("", mockup)
    url = str((await aiohttp_server(svc.app())).make_url("")).rstrip("/")
    config = load_config(write_config(tmp_path, url, [target("bmc1", "bmc", url)], timeout_s=5))
    client = await aiohttp_client(create_app(config, AppOptions(background=False)))
    await client.app[POLLER].poll_all()
    values = parse(await (await client.get("/metrics")).text())
    metrics = json.loads((SERVER / "Chassis/1U/PowerSubsystem/PowerSupplies/Bay1/Metrics/index.json").read_text())
    short1 = "B" * 115 + "~" + hashlib.sha256(long1.encode()).hexdigest()[:12]
    assert value(values, "lockstep_redfish_up", target="bmc1") == 1
    assert value(values, "lockstep_psu_input_power_watts", target="bmc1", chassis="1U", psu=short1) == \
        metrics["InputPowerWatts"]["Reading"]
    assert max(len(v) for key in values for _, v in key[1]) == 128
    assert value(values, "lockstep_redfish_long_labels", target="bmc1") == 1
    logged = next(r.fields for r in caplog.records if "served shortened" in r.getMessage())
    assert logged == {"target": "bmc1", "labels": 1, "limit": 128, "first": "B" * 60}


def test_two_long_label_values_sharing_their_head_stay_two():
    one, two = "x" * 200, "x" * 199 + "y"
    assert shortened(one) != shortened(two) and len(shortened(one)) == len(shortened(two)) == 128
    assert shortened(one).startswith("x" * 115 + "~") and shortened("x" * 128) == "x" * 128


async def test_a_bmc_stalled_after_the_headers_or_trickling_delays_no_other_and_times_out(aiohttp_server, tmp_path):
    """Two BMCs answer the status line and headers at once, then send nothing more ("stall") or one byte
    every half second ("trickle"). The per-request timeout covers the body: both are reported as timed
    out, and the healthy BMC's poll is complete while theirs are still waiting."""
    svc = MockupService()
    for prefix, mode in (("good", "ok"), ("stall", "stall"), ("trickle", "trickle")):
        svc.add(prefix, SERVER, mode=mode)
    base = str((await aiohttp_server(svc.app())).make_url("")).rstrip("/")
    config = load_config(write_config(tmp_path, base, [target(p, "bmc", f"{base}/{p}") for p in svc.devices],
                                      timeout_s=1.5))   # three trickled bytes: a timeout per read never fires
    async with aiohttp.ClientSession() as session:
        poller = Poller(config, HttpRedfish(session, retries=1))
        polls = {t.name: asyncio.create_task(poller.poll(t)) for t in config.targets}
        good = await polls["good"]
        assert good.up, good.error
        assert not polls["stall"].done() and not polls["trickle"].done()   # it did not wait for them
        for name in ("stall", "trickle"):
            result = await polls[name]
            assert not result.up and result.error.endswith("timed out"), result.error
    assert svc.devices["stall"].requests == 1 and svc.devices["trickle"].requests == 1   # a timeout is not retried


async def test_a_failed_poll_leaves_no_request_running(aiohttp_server, tmp_path):
    """The chassis' EnvironmentMetrics answer 500 while a PSU's metrics hang: the poll fails with the 500,
    and the hung request is cancelled with it, instead of running on (holding one of the BMC's request slots into
    its next poll, and loading a BMC already in trouble)."""
    svc = MockupService()
    svc.add("", SERVER)
    hung = asyncio.Event()

    async def broken_psus(request: web.Request) -> web.StreamResponse:
        if request.path.endswith("/EnvironmentMetrics"):
            await hung.wait()   # fail only once the other request hangs
            return web.json_response({"error": "internal"}, status=500)
        if request.path.endswith("Bay1/Metrics"):
            hung.set()
            await asyncio.sleep(3600)
        return await svc.handle(request)

    url = await serve(aiohttp_server, broken_psus)
    config = load_config(write_config(tmp_path, url, [target("bmc1", "bmc", url)], timeout_s=30))
    async with aiohttp.ClientSession() as session:
        result = await Poller(config, HttpRedfish(session, retries=0)).poll(config.targets[0])
        assert not result.up and "EnvironmentMetrics: HTTP 500" in result.error, result.error
        running = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and "_psu" in repr(t.get_coro())]
        assert running == []
