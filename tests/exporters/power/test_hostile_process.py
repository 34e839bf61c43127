"""The real ``lockstep power-exporter`` process against hostile BMCs beside healthy ones, on local
HTTP servers: a BMC listing 100,000 chassis in one answer just under the body limit, one whose
chassis answer too slowly for any poll to finish, and readings that are not finite numbers (NaN,
1e999, -Infinity). The process is held to the Helm chart's memory limit for the power exporter
(``process_bounds``) and every wait is a deadline polled for. The healthy targets must stay up with
their readings served throughout."""
from __future__ import annotations

import asyncio
import json
import math
import re
import shutil
import threading
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
from aiohttp import web

from lockstep.exporters.power.redfish import MAX_BODY_BYTES, MAX_MEMBERS, MAX_POLL_BYTES, PER_TARGET_REQUESTS
from lockstep.stack import http_get
from tests.helpers.paths import FIXTURES
from tests.helpers.power import parse, value
from tests.helpers.process_bounds import Bounded, helm_memory_limit
from tests.helpers.redfish_mockup import MockupService

pytestmark = pytest.mark.integration

SERVER, PDU = FIXTURES / "redfish/public-rackmount1", FIXTURES / "redfish/public-pdu"
LIMIT = helm_memory_limit("powerExporter")
SCRAPE_TIMEOUT_S = 10.0   # Prometheus' default scrape_timeout: a /metrics answer must beat it
GOOD = [f"good{i}" for i in range(8)]
CHASSIS = 100_000


def reading(mockup: Path, path: str, key: str = "PowerWatts") -> float:
    return json.loads((mockup / path / "index.json").read_text())[key]["Reading"]


@contextmanager
def serving(handler) -> Iterator[str]:
    """``handler`` served on 127.0.0.1 (an ephemeral port) from a thread of its own, so that the test
    can poll the exporter with plain blocking calls; yields the base URL."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    state: dict = {}

    async def start() -> None:
        app = web.Application()
        app.router.add_get("/{tail:.*}", handler)
        # handler_cancellation: a request the exporter hangs up on ends here too (as aiohttp_server does),
        # so that what is in flight here is what the exporter has in flight
        state["runner"] = runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        state["url"] = f"http://127.0.0.1:{runner.addresses[0][1]}"
        started.set()

    thread = threading.Thread(target=lambda: (loop.run_until_complete(start()), loop.run_forever()), daemon=True)
    thread.start()
    assert started.wait(30), "the fake BMCs did not start"
    try:
        yield state["url"]
    finally:
        asyncio.run_coroutine_threadsafe(state["runner"].cleanup(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)


def start_exporter(tmp_path: Path, targets: list[tuple[str, str, str]], interval_s: float, timeout_s: float,
                   options: tuple[str, ...] | list[str] = ()) -> tuple[Bounded, str]:
    config = tmp_path / "power.yaml"
    config.write_text(f"interval_s: {interval_s}\ntimeout_s: {timeout_s}\nretries: 0\ntargets:\n" + "".join(
        f"  - {{name: {name}, kind: {kind}, url: '{url}', rack: r1}}\n" for name, kind, url in targets))
    proc = Bounded.lockstep(["power-exporter", "--config", str(config), "--web.listen-address", "127.0.0.1:0",
                             *options], LIMIT, tmp_path / "power-exporter.log")
    proc.until(lambda: "listening" in proc.log(), 60, "the exporter listening")
    return proc, re.search(r"address=(\S+)", proc.log()).group(1)


def scrape(address: str) -> dict:
    status, body = http_get(address + "/metrics", timeout=SCRAPE_TIMEOUT_S)
    assert status == 200, body[:500]
    return parse(body.decode())


def up(values: dict, target: str) -> float | None:
    return values.get(("lockstep_redfish_up", (("target", target),)))


def last_success(values: dict, target: str) -> float:
    return values.get(("lockstep_redfish_last_success_timestamp_seconds", (("target", target),)), 0.0)


class HugeChassisBmc:
    """A BMC under ``/evil`` whose Chassis collection lists ``CHASSIS`` members in one answer just under
    the body limit: the server's real chassis first (the DMTF mockup's 1U), then numbered ones that each
    answer with a plain chassis document, after ``delay_s``. Every other resource is the mockup's."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.service = MockupService()
        self.service.add("evil", SERVER)
        members = [{"@odata.id": "/redfish/v1/Chassis/1U"}] + [
            {"@odata.id": f"/redfish/v1/Chassis/{i}"} for i in range(1, CHASSIS)]
        self.collection = json.dumps({"@odata.id": "/redfish/v1/Chassis", "Name": "Chassis Collection",
                                      "Members@odata.count": CHASSIS, "Members": members},
                                     separators=(",", ":")).encode()
        assert MAX_BODY_BYTES - 100_000 < len(self.collection) < MAX_BODY_BYTES
        self.asked: set[str] = set()   # numbered chassis requested
        self.in_flight = self.max_in_flight = 0

    async def handle(self, request: web.Request, path: str) -> web.StreamResponse:
        if path == "/redfish/v1/Chassis":
            return web.Response(body=self.collection, content_type="application/json")
        number = path.removeprefix("/redfish/v1/Chassis/")
        if not number.isdigit():
            return await self.service.handle(request)
        self.asked.add(number)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay_s)
            return web.json_response({"@odata.id": path, "Id": number, "Name": f"Chassis {number}"})
        finally:
            self.in_flight -= 1


@contextmanager
def fleet(hostile: HugeChassisBmc) -> Iterator[tuple[str, MockupService]]:
    """Eight healthy BMCs under ``/good<i>`` and the hostile one under ``/evil``, on one server."""
    good = MockupService()
    for name in GOOD:
        good.add(name, SERVER)

    async def handler(request: web.Request) -> web.StreamResponse:
        if request.path.startswith("/evil/"):
            return await hostile.handle(request, request.path.removeprefix("/evil").rstrip("/"))
        return await good.handle(request)

    with serving(handler) as base:
        yield base, good


def fleet_targets(base: str) -> list[tuple[str, str, str]]:
    return [(name, "bmc", f"{base}/{name}") for name in GOOD] + [("evil", "bmc", f"{base}/evil")]


def test_a_bmc_listing_100000_chassis_costs_its_own_poll_only(tmp_path):
    """Before: every poll made a task per listed chassis: 100 % CPU, the RSS past the chart's 256 Mi
    limit within seconds, /metrics taking seconds to answer. Now the first MAX_MEMBERS chassis are
    read, the rest counted (metric and log line); the BMC's own server chassis is still read; the
    eight healthy BMCs stay up and keep being polled; SIGTERM stops the exporter."""
    hostile = HugeChassisBmc()
    with fleet(hostile) as (base, good):
        proc, address = start_exporter(tmp_path, fleet_targets(base), interval_s=2, timeout_s=5)
        try:
            seen: dict = {}

            def all_polled() -> bool:
                seen.update(values=scrape(address))
                return all(up(seen["values"], t) is not None for t in GOOD + ["evil"])

            proc.until(all_polled, 60, "every target polled once")
            values = seen["values"]
            assert all(up(values, t) == 1 for t in GOOD), {t: up(values, t) for t in GOOD}
            expected = reading(SERVER, "Chassis/1U/EnvironmentMetrics")
            assert all(value(values, "lockstep_chassis_power_watts", target=t) == expected for t in GOOD)
            assert up(values, "evil") == 1
            assert value(values, "lockstep_chassis_power_watts", target="evil") == expected
            assert value(values, "lockstep_redfish_skipped_members", target="evil") == CHASSIS - MAX_MEMBERS
            assert not any(k[0] == "lockstep_redfish_skipped_members" and k[1] != (("target", "evil"),)
                           for k in values)
            assert f"skipped={CHASSIS - MAX_MEMBERS}" in proc.log() and "target=evil" in proc.log()
            # The healthy BMCs keep being polled: each one's last success moves on, scrape after scrape.
            before = {t: last_success(values, t) for t in GOOD}
            proc.until(lambda: all(last_success(scrape(address), t) > before[t] for t in GOOD), 30,
                       "every healthy BMC polled again")
            assert len(hostile.asked) < MAX_MEMBERS and hostile.max_in_flight <= PER_TARGET_REQUESTS
            assert all(d.requests > 0 for d in good.devices.values())
            proc.terminate()
            assert proc.exited(10) == 0
        finally:
            proc.stop()


def test_a_bmc_too_slow_for_its_poll_deadline_stops_there_and_delays_no_other(tmp_path):
    """The same BMC answering each listed chassis after 1.5 s: reading even the capped members would
    take 100 s, far past the poll deadline (one interval). The poll stops at its deadline (the BMC
    down, its requests ended), and the healthy BMCs keep being polled and served meanwhile."""
    hostile = HugeChassisBmc(delay_s=1.5)
    with fleet(hostile) as (base, good):
        proc, address = start_exporter(tmp_path, fleet_targets(base), interval_s=3, timeout_s=2)
        try:
            seen: dict = {}

            def evil_down() -> bool:
                seen.update(values=scrape(address))
                return up(seen["values"], "evil") == 0

            proc.until(evil_down, 60, "the slow BMC's poll ending at its deadline")
            assert "poll deadline exceeded" in proc.log()
            values = seen["values"]
            assert all(up(values, t) == 1 for t in GOOD)
            before = {t: last_success(values, t) for t in GOOD}
            proc.until(lambda: all(last_success(scrape(address), t) > before[t] for t in GOOD), 30,
                       "every healthy BMC polled again while the slow one is polled")
            assert hostile.max_in_flight <= PER_TARGET_REQUESTS
            proc.terminate()   # while a poll of the slow BMC is in progress
            assert proc.exited(10) == 0
        finally:
            proc.stop()



class FatChassisBmc(HugeChassisBmc):
    """A BMC under ``/evil`` listing 40 chassis, each (but the real 1U) a document just under the body
    limit, of small objects (the most memory per byte once decoded)."""

    def __init__(self) -> None:
        super().__init__()
        members = [{"@odata.id": "/redfish/v1/Chassis/1U"}] + [{"@odata.id": f"/redfish/v1/Chassis/{i}"}
                                                               for i in range(1, 40)]
        self.collection = json.dumps({"@odata.id": "/redfish/v1/Chassis", "Members": members}).encode()
        pad = json.dumps([{"x": i} for i in range(330_000)], separators=(",", ":"))
        self.template = '{"@odata.id": "%s", "Id": "%s", "Oem": {"pad": ' + pad + '}}'
        self.answered = 0
        assert MAX_BODY_BYTES - (1 << 20) < len(self.template) < MAX_BODY_BYTES

    async def handle(self, request: web.Request, path: str) -> web.StreamResponse:
        number = path.removeprefix("/redfish/v1/Chassis/")
        if path == "/redfish/v1/Chassis" or not number.isdigit():
            return await super().handle(request, path)
        self.asked.add(number)
        self.answered += 1
        return web.Response(body=(self.template % (path, number)).encode(), content_type="application/json")


def test_a_bmc_answering_every_chassis_with_megabytes_costs_its_own_poll_only(tmp_path):
    """Before: every chassis document was kept in the target's structure cache, the RSS growing by
    the decoded size of each (gigabytes for 40 chassis). Now a poll reads at most MAX_POLL_BYTES (this
    BMC's poll fails, saying so) and the cache holds at most MAX_STRUCTURE_BYTES: several polls on,
    the exporter is within its limit and the healthy BMCs are up."""
    hostile = FatChassisBmc()
    with fleet(hostile) as (base, _):
        proc, address = start_exporter(tmp_path, fleet_targets(base), interval_s=1, timeout_s=5)
        try:
            proc.until(lambda: up(scrape(address), "evil") == 0, 60, "the BMC's poll failing")
            assert f"exceed {MAX_POLL_BYTES >> 20} MiB" in proc.log()
            proc.until(lambda: hostile.answered >= 40, 60, "forty megabyte answers, over several polls")
            before = {t: last_success(scrape(address), t) for t in GOOD}
            proc.until(lambda: all(last_success(values := scrape(address), t) > before[t] and up(values, t) == 1
                                   for t in GOOD), 30, "every healthy BMC polled again")
            proc.terminate()
            assert proc.exited(10) == 0
        finally:
            proc.stop()


def test_sigterm_during_a_probe_of_a_slow_bmc_stops_the_exporter_at_once(tmp_path):
    """Before: shutdown waited for the requests in flight, so a /probe of a BMC too slow for its budget
    held SIGTERM for the rest of that budget (up to four intervals: a minute here) and the exporter was
    killed by the orchestrator instead. Now shutdown ends the polls in progress: the probe answers
    (the target down) and the exporter exits."""
    hostile = HugeChassisBmc(delay_s=1.5)
    with fleet(hostile) as (base, _):
        proc, address = start_exporter(tmp_path, [("evil", "bmc", f"{base}/evil")], interval_s=15, timeout_s=5,
                                       options=["--no-background"])
        answer: dict = {}

        def probe() -> None:
            request = urllib.request.Request(address + "/probe?target=evil",
                                             headers={"X-Prometheus-Scrape-Timeout-Seconds": "60"})
            with urllib.request.urlopen(request, timeout=120) as response:
                answer["status"], answer["body"] = response.status, response.read()

        prober = threading.Thread(target=probe, daemon=True)
        try:
            prober.start()
            proc.until(lambda: hostile.in_flight > 0, 30, "the probe reading the slow BMC's chassis")
            proc.terminate()
            assert proc.exited(10) == 0
        finally:
            proc.stop()
        prober.join(30)
        assert answer["status"] == 200 and up(parse(answer["body"].decode()), "evil") == 0

NAN, INF, NEG_INF, HUGE, SCALES_PAST_FLOAT = "NaN", "Infinity", "-Infinity", "1e999", "1e307"


def edited(tmp_path: Path, name: str, mockup: Path, edits: dict[str, dict[str, str]]) -> Path:
    """A copy of ``mockup`` with readings of some resources replaced by a JSON token that is not a
    finite number: ``{resource: {property: token}}`` for ``property.Reading`` (``property.Field`` for
    another field of the excerpt, a plain property where it is no excerpt)."""
    copy = tmp_path / name
    shutil.copytree(mockup, copy)
    for resource, changes in edits.items():
        path = copy / resource / "index.json"
        doc = json.loads(path.read_text())
        for key, token in changes.items():
            key, _, field = key.partition(".")
            if isinstance(doc.get(key), dict):
                doc[key][field or "Reading"] = f"@{token}@"
            else:
                doc[key] = f"@{token}@"
        path.write_text(re.sub(r'"@([^@"]+)@"', r"\1", json.dumps(doc)))
    return copy


ENV, BAY1 = "Chassis/1U/EnvironmentMetrics", "Chassis/1U/PowerSubsystem/PowerSupplies/Bay1/Metrics"


def test_non_finite_readings_are_left_out_counted_and_the_target_stays_up(tmp_path):
    """Before: NaN, 1e999 and -Infinity in a BMC's JSON came out as lockstep_chassis_power_watts NaN,
    +Inf and -Inf with up=1, which poisons every rack sum and the power dashboard. Now such a reading
    is absent (the next source in the fallback order answers for it), counted per target, logged once,
    and the target stays up with its other readings; a PDU outlet's NaN loses that outlet alone."""
    svc = MockupService()
    svc.add("nan_env", edited(tmp_path, "nan_env", SERVER, {ENV: {"PowerWatts": NAN}}))
    svc.add("inf_psu", edited(tmp_path, "inf_psu", SERVER, {BAY1: {"InputPowerWatts": NEG_INF,
                                                                  "EnergykWh": SCALES_PAST_FLOAT}}))
    svc.add("huge", edited(tmp_path, "huge", SERVER, {ENV: {"PowerWatts": HUGE, "PowerLimitWatts.SetPoint": INF},
                                                      BAY1: {"InputPowerWatts": NAN}}))
    svc.add("pdu", edited(tmp_path, "pdu", PDU, {"PowerEquipment/RackPDUs/1/Outlets/A1": {"PowerWatts": NAN}}))
    svc.add("good", SERVER)

    async def handler(request: web.Request) -> web.StreamResponse:
        return await svc.handle(request)

    with serving(handler) as base:
        names = [("nan_env", "bmc"), ("inf_psu", "bmc"), ("huge", "bmc"), ("pdu", "pdu"), ("good", "bmc")]
        proc, address = start_exporter(tmp_path, [(n, k, f"{base}/{n}") for n, k in names], interval_s=2,
                                       timeout_s=5)
        try:
            seen: dict = {}

            def polled() -> bool:
                seen.update(values=scrape(address))
                return all(up(seen["values"], n) is not None for n, _ in names)

            proc.until(polled, 60, "every target polled once")
            values = seen["values"]
            assert all(math.isfinite(v) for v in values.values()), [k for k, v in values.items()
                                                                    if not math.isfinite(v)]
            assert all(up(values, n) == 1 for n, _ in names)
            psu_input = reading(SERVER, BAY1, "InputPowerWatts")
            legacy = json.loads((SERVER / "Chassis/1U/Power/index.json").read_text())["PowerControl"][0]

            def invalid(target: str) -> float | None:
                return values.get(("lockstep_redfish_invalid_readings", (("target", target),)))

            # NaN power: the sum of the PSU inputs answers for the chassis
            assert value(values, "lockstep_chassis_power_watts", target="nan_env") == psu_input
            assert invalid("nan_env") == 1
            # -Infinity PSU input and an energy that overflows once scaled to joules: that PSU's
            # series are absent, the chassis power is the EnvironmentMetrics one
            assert value(values, "lockstep_chassis_power_watts", target="inf_psu") == reading(SERVER, ENV)
            assert ("lockstep_psu_input_power_watts", (("chassis", "1U"), ("psu", "Bay1"), ("target", "inf_psu"))) \
                not in values
            assert not any(k[0] == "lockstep_psu_energy_joules_total" and ("target", "inf_psu") in k[1]
                           for k in values)
            assert invalid("inf_psu") == 2
            # 1e999 power, an infinite limit and a NaN PSU: the deprecated Power resource answers
            assert value(values, "lockstep_chassis_power_watts", target="huge") == legacy["PowerConsumedWatts"]
            assert value(values, "lockstep_chassis_power_limit_watts", target="huge") == \
                legacy["PowerLimit"]["LimitInWatts"]
            assert invalid("huge") == 3
            # a PDU: the NaN outlet is absent, its siblings are served
            outlets = {dict(k[1])["outlet"] for k in values if k[0] == "lockstep_pdu_outlet_power_watts"}
            assert "A1" not in outlets and {"A2", "B1"} <= outlets
            assert invalid("pdu") == 1
            assert invalid("good") is None
            assert value(values, "lockstep_chassis_power_watts", target="good") == reading(SERVER, ENV)
            assert proc.log().count("not finite numbers") == 4
            proc.terminate()
            assert proc.exited(10) == 0
        finally:
            proc.stop()
