"""The power exporter against an aiohttp Redfish service serving the DMTF mockups as they are.
Expected values are read from the mockup JSON here, never from the exporter's output."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import pytest

from lockstep.exporters.power.app import POLLER, AppOptions, create_app
from lockstep.exporters.power.config import load_config
from lockstep.exporters.power.poller import Poller
from lockstep.exporters.power.redfish import HttpRedfish
from tests.helpers.paths import FIXTURES
from tests.helpers.power import parse, target, value, write_config
from tests.helpers.redfish_mockup import MockupService

REDFISH = FIXTURES / "redfish"
PDU, CDU, SERVER = REDFISH / "public-pdu", REDFISH / "public-cooling-unit", REDFISH / "public-rackmount1"


def resource(mockup: Path, path: str) -> dict:
    return json.loads((mockup / path / "index.json").read_text())


def members(mockup: Path, path: str) -> list[str]:
    return [m["@odata.id"].removeprefix("/redfish/v1/") for m in resource(mockup, path)["Members"]]


@pytest.fixture
async def service(aiohttp_server):
    svc = MockupService()
    for prefix, mockup, mode in (("bmc", SERVER, "ok"), ("pdu", PDU, "ok"), ("cdu", CDU, "ok"),
                                 ("hung", PDU, "hang"), ("err", SERVER, "500"), ("broken", CDU, "badjson")):
        svc.add(prefix, mockup, mode=mode)
    server = await aiohttp_server(svc.app())
    svc.base = str(server.make_url("")).rstrip("/")
    return svc


@pytest.fixture
async def scrape(service, tmp_path, aiohttp_client):
    b = service.base
    config = load_config(write_config(tmp_path, b, [
        target("bmc1", "bmc", f"{b}/bmc"), target("pdu1", "pdu", f"{b}/pdu", extra="    budget_watts: 60000\n"),
        target("cdu1", "cdu", f"{b}/cdu"), target("hung", "pdu", f"{b}/hung", rack="r2"),
        target("err", "bmc", f"{b}/err", rack="r2"), target("broken", "cdu", f"{b}/broken", rack="r2")],
        timeout_s=3))     # the hung target costs this once per test; at 0.5 s a healthy answer under CI's load missed it
    client = await aiohttp_client(create_app(config, AppOptions(background=False)))
    await client.app[POLLER].poll_all()
    response = await client.get("/metrics")
    assert response.status == 200
    client.text = await response.text()
    return parse(client.text), client


async def test_golden_exposition(scrape, golden):
    _, client = scrape
    volatile = ("lockstep_redfish_poll_duration_seconds", "lockstep_redfish_last_success_timestamp_seconds")
    golden("power/mockups.prom", "".join(line for line in client.text.splitlines(True)
                                        if not line.startswith(volatile)))


async def test_failing_targets_are_down_alone(scrape):
    values, _ = scrape
    ups = {dict(k[1])["target"]: v for k, v in values.items() if k[0] == "lockstep_redfish_up"}
    assert ups == {"bmc1": 1, "pdu1": 1, "cdu1": 1, "hung": 0, "err": 0, "broken": 0}
    stamps = {dict(k[1])["target"] for k in values if k[0] == "lockstep_redfish_last_success_timestamp_seconds"}
    assert stamps == {"bmc1", "pdu1", "cdu1"}
    for name, labels in values:
        assert dict(labels).get("target") not in ("hung", "err", "broken") or name in (
            "lockstep_redfish_up", "lockstep_redfish_poll_duration_seconds", "lockstep_power_target_info")
    assert value(values, "lockstep_rack_power_budget_watts", rack="r1") == 60000


async def test_server_bmc_readings(scrape):
    values, _ = scrape
    env = resource(SERVER, "Chassis/1U/EnvironmentMetrics")
    assert value(values, "lockstep_chassis_power_watts", target="bmc1") == env["PowerWatts"]["Reading"]
    assert value(values, "lockstep_chassis_power_limit_watts", target="bmc1") == env["PowerLimitWatts"]["SetPoint"]
    psu = resource(SERVER, "Chassis/1U/PowerSubsystem/PowerSupplies/Bay1/Metrics")
    bay1 = dict(target="bmc1", chassis="1U", psu="Bay1")
    assert value(values, "lockstep_psu_input_power_watts", **bay1) == psu["InputPowerWatts"]["Reading"]
    assert value(values, "lockstep_psu_energy_joules_total", **bay1) == \
        psu["EnergykWh"]["Reading"] * 3_600_000
    assert not [k for k in values if k[0] == "lockstep_psu_input_power_watts" and ("psu", "Bay2") in k[1]]  # absent bay


async def test_pdu_readings_outlets_and_mains(scrape):
    values, _ = scrape
    metrics = resource(PDU, "PowerEquipment/RackPDUs/1/Metrics")
    assert value(values, "lockstep_pdu_power_watts", pdu="pdu1", rack="r1") == metrics["PowerWatts"]["Reading"]
    assert value(values, "lockstep_pdu_energy_joules_total", pdu="pdu1", rack="r1") == \
        metrics["EnergykWh"]["Reading"] * 3_600_000
    seen = 0
    for path in members(PDU, "PowerEquipment/RackPDUs/1/Outlets"):
        outlet = resource(PDU, path)
        labels = dict(pdu="pdu1", rack="r1", outlet=outlet["Id"])
        if "PowerWatts" in outlet:
            seen += 1
            assert value(values, "lockstep_pdu_outlet_power_watts", **labels) == outlet["PowerWatts"]["Reading"]
            assert value(values, "lockstep_pdu_outlet_energy_joules_total", **labels) == \
                outlet["EnergykWh"]["Reading"] * 3_600_000
    assert seen == 9
    for path in members(PDU, "PowerEquipment/RackPDUs/1/Mains"):
        circuit = resource(PDU, path)
        for key, name in (("PolyPhasePowerWatts", "lockstep_pdu_mains_power_watts"),
                          ("PolyPhaseCurrentAmps", "lockstep_pdu_mains_current_amperes"),
                          ("PolyPhaseVoltage", "lockstep_pdu_mains_voltage_volts")):
            for line, excerpt in circuit[key].items():
                assert value(values, name, pdu="pdu1", rack="r1", circuit=circuit["Id"], line=line) == excerpt["Reading"]


async def test_cdu_coolant_pumps_and_leak_detectors(scrape):
    values, _ = scrape
    # secondary connectors feed the racks: the plain supply/return loop; primary: the facility side
    for side, loop, point in (("Primary", "facility", "facility_"), ("Secondary", "rack", "")):
        (path,) = members(CDU, f"ThermalEquipment/CDUs/1/{side}CoolantConnectors")
        c = resource(CDU, path)
        assert value(values, "lockstep_coolant_temperature_celsius", target="cdu1", loop=f"{point}supply") == \
            c["SupplyTemperatureCelsius"]["Reading"]
        assert value(values, "lockstep_coolant_temperature_celsius", target="cdu1", loop=f"{point}return") == \
            c["ReturnTemperatureCelsius"]["Reading"]
        assert value(values, "lockstep_coolant_flow_cubic_meters_per_second", target="cdu1", loop=loop) == \
            pytest.approx(c["FlowLitersPerMinute"]["Reading"] / 1000 / 60)
        assert value(values, "lockstep_coolant_pressure_pascals", target="cdu1", loop=f"{point}supply") == \
            c["SupplyPressurekPa"]["Reading"] * 1000
        assert value(values, "lockstep_cdu_heat_removed_watts", target="cdu1", loop=loop) == \
            pytest.approx(c["HeatRemovedkW"]["Reading"] * 1000)
    for path in members(CDU, "ThermalEquipment/CDUs/1/Pumps"):
        pump = resource(CDU, path)
        assert value(values, "lockstep_cdu_pump_speed_ratio", target="cdu1", pump=pump["Id"]) == \
            pump["PumpSpeedPercent"]["Reading"] / 100
        assert value(values, "lockstep_cdu_pump_state", target="cdu1", pump=pump["Id"],
                     state=pump["Status"]["State"]) == 1
    for path in members(CDU, "ThermalEquipment/CDUs/1/LeakDetection/LeakDetectors"):
        detector = resource(CDU, path)
        for state in ("OK", "Warning", "Critical"):
            assert value(values, "lockstep_leak_detector_state", target="cdu1", detector=detector["Id"],
                         state=state) == (state == detector["DetectorState"])


async def test_probe_polls_one_target(scrape):
    _, client = scrape
    ok = parse(await (await client.get("/probe", params={"target": "pdu1"})).text())
    assert value(ok, "lockstep_redfish_up", target="pdu1") == 1
    assert {dict(k[1]).get("pdu", dict(k[1]).get("target")) for k in ok} - {None} == {"pdu1"}
    assert value(ok, "lockstep_rack_power_budget_watts", rack="r1") == 60000
    hung = await client.get("/probe", params={"target": "hung"}, headers={"X-Prometheus-Scrape-Timeout-Seconds": "1"})
    assert value(parse(await hung.text()), "lockstep_redfish_up", target="hung") == 0
    assert (await client.get("/probe", params={"target": "nope"})).status == 400


async def test_openmetrics_negotiation(scrape):
    _, client = scrape
    response = await client.get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    text = await response.text()
    assert response.headers["Content-Type"].startswith("application/openmetrics-text")
    assert "# UNIT lockstep_pdu_power_watts watts" in text and text.endswith("# EOF\n")


async def test_structure_is_cached_between_polls_and_rediscovered_when_out_of_date(aiohttp_server, tmp_path):
    svc = MockupService()
    device = svc.add("", SERVER)
    server = await aiohttp_server(svc.app())
    url = str(server.make_url("")).rstrip("/")
    config = load_config(write_config(tmp_path, url, [target("bmc1", "bmc", url)]))
    async with aiohttp.ClientSession() as session:
        poller = Poller(config, HttpRedfish(session, retries=0))
        counts = []
        for mode, mockup in (("ok", SERVER), ("ok", SERVER), ("500", SERVER), ("ok", SERVER),
                             ("ok", REDFISH / "public-pdu"), ("ok", SERVER)):
            device.mode, device.mockup, before = mode, mockup, device.requests
            result = await poller.poll(config.targets[0])
            assert result.up == (mode == "ok" and mockup == SERVER)
            while device.in_flight:  # a GET that a failed sibling left running still counts here
                await asyncio.sleep(0.01)
            counts.append(device.requests - before)
    # root, Chassis, 1U, EnvironmentMetrics, PowerSubsystem, PowerSupplies, Bay1, Bay1/Metrics, Bay2,
    # and Systems, Systems/437XR1138R2 (which chassis is the server's); then only the two resources
    # carrying readings. A 500 (a busy BMC: both answer 500) keeps the structure, so the next poll is
    # two requests again; a 404 on one of them (the service is now another device: the PDU mockup
    # has no 1U chassis)
    # means the layout changed, and the walk starts over from the service root.
    assert counts[:4] == [11, 2, 2, 2]
    assert counts[4:] == [2, 11]


async def _hung_before_ok(aiohttp_server, tmp_path, settings: str):
    """A hung BMC listed before a healthy one, with a single poll slot (``max_concurrency: 1``)."""
    svc = MockupService()
    svc.add("hung", SERVER).mode = "hang"
    svc.add("ok", SERVER)
    server = await aiohttp_server(svc.app())
    url = str(server.make_url("")).rstrip("/")
    path = tmp_path / "power.yaml"
    path.write_text(settings + "retries: 0\nmax_concurrency: 1\ntargets:\n"
                    + target("hung", "bmc", url + "/hung") + target("ok", "bmc", url + "/ok"))
    return svc, load_config(path)


async def test_waiting_for_a_poll_slot_counts_against_the_probe_budget(aiohttp_server, tmp_path):
    """Before: ``poll`` took its semaphore slot before starting the budget's clock, so with every slot
    held by hung BMCs a /probe waited for a slot without limit, past Prometheus' scrape timeout."""
    import asyncio

    svc, config = await _hung_before_ok(aiohttp_server, tmp_path, "timeout_s: 600\n")
    async with aiohttp.ClientSession() as session:
        poller = Poller(config, HttpRedfish(session, retries=0))
        holder = asyncio.create_task(poller.poll(config.targets[0], 600))
        while not svc.devices["hung"].requests:  # the hung poll holds the only slot
            await asyncio.sleep(0.01)
        # The guard only turns a hang into a failure; the budget under test is 0.2 s.
        result = await asyncio.wait_for(poller.poll(config.targets[1], 0.2), 60)
        holder.cancel()
    assert not result.up
    assert "slot" in result.error


async def test_a_background_poll_waits_its_turn_without_losing_its_deadline(aiohttp_server, tmp_path):
    """The slot wait counts only against a caller's budget (/probe): in the background rounds a target
    queued behind a hung one must still get its full deadline, or a fleet larger than max_concurrency
    would show healthy targets as down."""
    svc, config = await _hung_before_ok(aiohttp_server, tmp_path, "interval_s: 1\ntimeout_s: 1\n")
    async with aiohttp.ClientSession() as session:
        poller = Poller(config, HttpRedfish(session, retries=0))
        await poller.poll_all()  # "hung" takes the only slot first and holds it for its whole deadline
    assert svc.devices["hung"].requests == 1
    assert not poller.results["hung"].up
    assert poller.results["ok"].up, poller.results["ok"].error
