"""The simulated Redfish service answers like the DMTF mockups (fixtures/redfish) with the model's
power: server = GPUs + base load, PDU = sum of its rack, CDU coolant temperatures."""
from __future__ import annotations

import pytest

from lockstep.simulator import redfish
from lockstep.simulator.model import Model
from lockstep.simulator.scenario import load_scenario
from tests.helpers.paths import REPO

SCENARIOS = REPO / "simulator" / "scenarios"


@pytest.fixture
def sim():
    scenario = load_scenario(SCENARIOS / "checkpoint.yaml")
    model = Model(scenario)
    states = model.states(scenario.ticks)
    for _ in range(4):
        state = next(states)
    return model.topo, state, redfish.snapshot_of(state)


async def get(client, path: str, status: int = 200) -> dict:
    resp = await client.get(path)
    assert resp.status == status, path
    return await resp.json()


async def test_bmc_chassis_power_follows_the_gpus(aiohttp_client, sim) -> None:
    topo, state, snap = sim
    client = await aiohttp_client(redfish.create_app(topo, lambda: snap))
    root = await get(client, "/node01/redfish/v1")
    assert root["@odata.type"].startswith("#ServiceRoot.") and root["@odata.id"] == "/redfish/v1/"
    chassis = await get(client, "/node01" + root["Chassis"]["@odata.id"])
    (member,) = chassis["Members"]
    c = await get(client, "/node01" + member["@odata.id"])
    assert c["@odata.type"] == "#Chassis.v1_28_0.Chassis" and c["ChassisType"] == "RackMount"
    power = await get(client, "/node01" + c["Power"]["@odata.id"])
    assert power["@odata.type"] == "#Power.v1_7_3.Power"
    watts = power["PowerControl"][0]["PowerConsumedWatts"]
    gpu_watts = state.gpu["power_mw"][8:16].sum() / 1000
    assert watts == state.power["chassis_w"][1] and 2000 < watts - gpu_watts < 3700
    env = await get(client, "/node01" + c["EnvironmentMetrics"]["@odata.id"])
    assert env["PowerWatts"]["Reading"] == watts and env["EnergykWh"]["Reading"] > 0
    sub = await get(client, "/node01" + c["PowerSubsystem"]["@odata.id"])
    supplies = await get(client, "/node01" + sub["PowerSupplies"]["@odata.id"])
    inputs = []
    for m in supplies["Members"]:
        psu = await get(client, "/node01" + m["@odata.id"])
        metrics = await get(client, "/node01" + psu["Metrics"]["@odata.id"])
        assert metrics["@odata.type"] == "#PowerSupplyMetrics.v1_2_0.PowerSupplyMetrics"
        inputs.append(metrics["InputPowerWatts"]["Reading"])
    assert sum(inputs) == pytest.approx(watts, abs=1)


async def test_pdu_is_the_sum_of_its_rack(aiohttp_client, sim) -> None:
    topo, state, snap = sim
    client = await aiohttp_client(redfish.create_app(topo, lambda: snap))
    equipment = await get(client, "/r2-pdu/redfish/v1/PowerEquipment")
    pdus = await get(client, "/r2-pdu" + equipment["RackPDUs"]["@odata.id"])
    pdu = await get(client, "/r2-pdu" + pdus["Members"][0]["@odata.id"])
    assert pdu["@odata.id"] == "/redfish/v1/PowerEquipment/RackPDUs/1" and pdu["EquipmentType"] == "RackPDU"
    metrics = await get(client, "/r2-pdu" + pdu["Metrics"]["@odata.id"])
    assert metrics["@odata.type"] == "#PowerDistributionMetrics.v1_4_0.PowerDistributionMetrics"
    rack_servers = state.power["chassis_w"][2] + state.power["chassis_w"][3]  # node02, node03 are rack r2
    assert metrics["PowerWatts"]["Reading"] == pytest.approx(rack_servers + 400, abs=0.2)
    assert metrics["EnergykWh"]["Reading"] == round(state.power["pdu_j"][1] / 3.6e6, 3)
    outlets = await get(client, "/r2-pdu" + pdu["Outlets"]["@odata.id"])
    readings = [(await get(client, "/r2-pdu" + o["@odata.id"]))["PowerWatts"]["Reading"] for o in outlets["Members"]]
    assert readings == [state.power["chassis_w"][2], state.power["chassis_w"][3]]
    mains = await get(client, "/r2-pdu" + pdu["Mains"]["@odata.id"])
    assert (await get(client, "/r2-pdu" + mains["Members"][0]["@odata.id"]))["CircuitType"] == "Mains"


async def test_cdu_reports_coolant_and_leaks(aiohttp_client, sim) -> None:
    topo, state, snap = sim
    client = await aiohttp_client(redfish.create_app(topo, lambda: snap))
    cdus = await get(client, "/cdu1/redfish/v1/ThermalEquipment/CDUs")
    cdu = await get(client, "/cdu1" + cdus["Members"][0]["@odata.id"])
    assert cdu["@odata.type"] == "#CoolingUnit.v1_5_0.CoolingUnit" and cdu["EquipmentType"] == "CDU"
    loops = await get(client, "/cdu1" + cdu["SecondaryCoolantConnectors"]["@odata.id"])
    loop = await get(client, "/cdu1" + loops["Members"][0]["@odata.id"])
    supply, ret = loop["SupplyTemperatureCelsius"]["Reading"], loop["ReturnTemperatureCelsius"]["Reading"]
    assert (supply, ret) == (state.coolant["supply_c"], state.coolant["return_c"]) and 2 < ret - supply < 10
    assert loop["FlowLitersPerMinute"]["Reading"] > 0
    leak = await get(client, "/cdu1" + cdu["LeakDetection"]["@odata.id"])
    assert {d["DetectorState"] for d in leak["LeakDetectorGroups"][0]["Detectors"]} == {"OK"}
    pump = await get(client, "/cdu1" + (await get(client, "/cdu1" + cdu["Pumps"]["@odata.id"]))["Members"][0]["@odata.id"])
    assert pump["PumpSpeedPercent"]["Reading"] > 0


async def test_unknown_devices_and_paths_are_404(aiohttp_client, sim) -> None:
    topo, _, snap = sim
    client = await aiohttp_client(redfish.create_app(topo, lambda: snap))
    assert "error" in await get(client, "/node99/redfish/v1", 404)
    assert "error" in await get(client, "/node00/redfish/v1/Chassis/2", 404)
    assert "error" in await get(client, "/cdu1/redfish/v1/Chassis/1/Power", 404)
