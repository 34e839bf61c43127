"""Which chassis' power is the server's: the one its ComputerSystem links, whatever order the BMC
lists its chassis in; the first chassis with a reading only where no system links one.

The service is the DMTF public-rackmount1 mockup (chassis 1U, 374 W, limit 500 W; its one system
links 1U) with some documents replaced at runtime; the stored fixture is never edited."""
from __future__ import annotations

import copy
import json

from lockstep.exporters.power.bmc import poll_bmc
from lockstep.exporters.power.config import Target
from lockstep.exporters.power.redfish import Fetch, RedfishError
from tests.helpers.paths import FIXTURES

SERVER = FIXTURES / "redfish/public-rackmount1"
R = "/redfish/v1"
SYSTEM = f"{R}/Systems/437XR1138R2"
ENCLOSURE_WATTS = 2600.0


def mockup(path: str) -> dict:
    return json.loads((SERVER / path.removeprefix(R).strip("/") / "index.json").read_text())


def service(changes: dict[str, dict]) -> Fetch:
    """public-rackmount1 with the documents in ``changes`` added or replaced."""

    async def fetch(odata_id: str, static: bool = False) -> dict:
        if odata_id in changes:
            return copy.deepcopy(changes[odata_id])
        try:
            return mockup(odata_id)
        except FileNotFoundError:
            raise RedfishError(f"GET {odata_id}: HTTP 404") from None

    return fetch


def chassis_collection(*ids: str) -> dict:
    return {f"{R}/Chassis": {"@odata.id": f"{R}/Chassis", "Members": [{"@odata.id": f"{R}/Chassis/{i}"} for i in ids]}}


def enclosure() -> dict:
    """A chassis enclosing the server with a (larger) reading of its own, as multi-node enclosures
    and some firmware's storage enclosures are listed ahead of the server."""
    c = f"{R}/Chassis/Enclosure"
    return {c: {"@odata.id": c, "Id": "Enclosure", "ChassisType": "Enclosure",
                "EnvironmentMetrics": {"@odata.id": f"{c}/EnvironmentMetrics"},
                "Links": {"Contains": [{"@odata.id": f"{R}/Chassis/1U"}]}},
            f"{c}/EnvironmentMetrics": {"@odata.id": f"{c}/EnvironmentMetrics",
                                        "PowerWatts": {"Reading": ENCLOSURE_WATTS}}}


def system_linking(*ids: str) -> dict:
    doc = mockup(SYSTEM)
    doc["Links"]["Chassis"] = [{"@odata.id": f"{R}/Chassis/{i}"} for i in ids]
    return {SYSTEM: doc}


async def chassis_power(fetch: Fetch) -> dict[str, float]:
    samples = await poll_bmc(Target("bmc1", "bmc", "http://mockup", rack="r1"), fetch)
    return {s.metric.name: s.value for s in samples if s.metric.name.startswith("lockstep_chassis_power")}


async def test_the_chassis_the_system_links_wins_over_an_enclosure_listed_first():
    """Before: the enclosure's 2600 W, the first chassis listed with a reading."""
    found = await chassis_power(service({**chassis_collection("Enclosure", "1U"), **enclosure()}))
    assert found == {"lockstep_chassis_power_watts": 374, "lockstep_chassis_power_limit_watts": 500}


async def test_of_several_linked_chassis_the_first_with_a_reading():
    baseboard = {"@odata.id": f"{R}/Chassis/Baseboard", "Id": "Baseboard", "ChassisType": "Module"}
    fetch = service({**chassis_collection("Enclosure", "Baseboard", "1U"), **enclosure(),
                     f"{R}/Chassis/Baseboard": baseboard, **system_linking("Baseboard", "1U")})
    assert (await chassis_power(fetch))["lockstep_chassis_power_watts"] == 374


async def test_no_reading_on_the_linked_chassis_is_no_chassis_power_not_the_enclosures():
    """Sensors briefly unavailable: the enclosure's reading must not stand in for the server's."""
    env, legacy = f"{R}/Chassis/1U/EnvironmentMetrics", f"{R}/Chassis/1U/Power"
    bay1 = f"{R}/Chassis/1U/PowerSubsystem/PowerSupplies/Bay1/Metrics"
    changes = {**chassis_collection("Enclosure", "1U"), **enclosure(),
               env: mockup(env), bay1: mockup(bay1), legacy: mockup(legacy)}
    changes[env]["PowerWatts"]["Reading"] = None
    changes[bay1]["InputPowerWatts"]["Reading"] = None
    changes[legacy]["PowerControl"][0]["PowerConsumedWatts"] = None
    assert await chassis_power(service(changes)) == {}


async def test_without_systems_the_first_chassis_with_a_reading():
    root = mockup(f"{R}/")
    del root["Systems"]
    found = await chassis_power(service({f"{R}/": root, **chassis_collection("Enclosure", "1U"), **enclosure()}))
    assert found == {"lockstep_chassis_power_watts": ENCLOSURE_WATTS}


async def test_a_system_linking_no_listed_chassis_falls_back_too():
    changes = {**chassis_collection("Enclosure", "1U"), **enclosure(), **system_linking()}
    assert (await chassis_power(service(changes)))["lockstep_chassis_power_watts"] == ENCLOSURE_WATTS
    changes.update(system_linking("Gone"))
    assert (await chassis_power(service(changes)))["lockstep_chassis_power_watts"] == ENCLOSURE_WATTS


async def test_links_match_members_despite_a_trailing_slash():
    changes = {**chassis_collection("Enclosure", "1U"), **enclosure(), **system_linking()}
    changes[SYSTEM]["Links"]["Chassis"] = [{"@odata.id": f"{R}/Chassis/1U/"}]
    assert (await chassis_power(service(changes)))["lockstep_chassis_power_watts"] == 374


async def test_unreadable_systems_fall_back_to_the_first_chassis_with_a_reading_and_say_so(caplog):
    """A BMC answering 500 on Systems still has good readings: they are reported, not the whole poll lost."""
    fetch = service({})

    async def broken_systems(odata_id: str, static: bool = False) -> dict:
        if odata_id.startswith(f"{R}/Systems"):
            raise RedfishError(f"GET {odata_id}: HTTP 500")
        return await fetch(odata_id, static)

    with caplog.at_level("WARNING", logger="lockstep.power"):
        found = await chassis_power(broken_systems)
    assert found == {"lockstep_chassis_power_watts": 374, "lockstep_chassis_power_limit_watts": 500}
    assert any("Systems unreadable" in r.getMessage() and "HTTP 500" in r.getMessage() for r in caplog.records)
